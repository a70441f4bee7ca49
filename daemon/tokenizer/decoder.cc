#include "daemon/tokenizer/decoder.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "daemon/tokenizer/byte_level.h"
#include "daemon/tokenizer/json_numbers.h"
#include "daemon/tokenizer/pattern.h"
#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {
namespace {

// Replaces every occurrence of from (not empty) in s, left to right.
void ReplaceAllLiteral(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = s.find(from);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t prev = 0;
  while (pos != std::string::npos) {
    out.append(s, prev, pos - prev);
    out.append(to);
    prev = pos + from.size();
    pos = s.find(from, prev);
  }
  out.append(s, prev, std::string::npos);
  s = std::move(out);
}

// The Rust WordPiece decoder's cleanup (transformers' list plus " do not").
constexpr std::pair<const char*, const char*> kWordPieceCleanUp[] = {
    {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
    {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
    {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};

// Byte-decodes each token; added tokens are emitted verbatim as their own
// segments (transformers.js), and a token with a character outside the byte
// table is taken verbatim (Rust). Each segment is made valid UTF-8 by
// replacing each maximal invalid subsequence with U+FFFD.
class ByteLevelDecoder : public Decoder {
 public:
  explicit ByteLevelDecoder(const std::unordered_set<std::string>* added) : added_(added) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    for (const auto& t : tokens) {
      if (added_ != nullptr && added_->count(t) > 0) {
        if (!bytes.empty()) out.push_back(SanitizeUtf8(bytes));
        bytes.clear();
        out.push_back(t);
        continue;
      }
      if (!AppendBytesOfToken(t, bytes)) bytes += t;
    }
    if (!bytes.empty()) out.push_back(SanitizeUtf8(bytes));
    tokens = std::move(out);
  }
  void PieceBytes(std::string& token) const override {
    if (added_ != nullptr && added_->count(token) > 0) return;
    std::string bytes;
    if (AppendBytesOfToken(token, bytes)) token = std::move(bytes);
  }

 private:
  const std::unordered_set<std::string>* added_;
};

// The byte of a "<0xNN>" piece, or -1 for any other token.
int ByteOfPiece(std::string_view t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]);
  const int lo = hex(t[4]);
  return hi >= 0 && lo >= 0 ? hi * 16 + lo : -1;
}

// <0xNN> pieces are collected into bytes; a run that is valid UTF-8 becomes
// its text, otherwise one U+FFFD per byte (the Rust library's rule).
class ByteFallbackDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t count = 0;
    const auto flush = [&] {
      if (count == 0) return;
      if (IsValidUtf8(bytes)) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < count; ++k)
          out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      count = 0;
    };
    for (auto& t : tokens) {
      const int byte = ByteOfPiece(t);
      if (byte >= 0) {
        bytes.push_back(static_cast<char>(byte));
        ++count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
  void PieceBytes(std::string& token) const override {
    const int byte = ByteOfPiece(token);
    if (byte >= 0) token.assign(1, static_cast<char>(byte));
  }
};

class FuseDecoder : public Decoder {
 public:
  void DecodeChain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
  void PieceBytes(std::string& /*token*/) const override {}
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0;
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 &&
                         b + content_.size() <= t.size();
           ++k) {
        b += content_.size();
      }
      size_t e = t.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k) {
        e -= content_.size();
      }
      t = t.substr(b, e - b);
    }
  }
  // Strip takes characters off a text's ends, which a middle token is not
  // at (the models that use it fuse their tokens first).
  void PieceBytes(std::string& /*token*/) const override {}

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(Pattern p, std::string content)
      : pattern_(std::move(p)), content_(std::move(content)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens)
      t = pattern_.ReplaceAll(t, content_);
  }
  void PieceBytes(std::string& token) const override {
    token = pattern_.ReplaceAll(token, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      ReplaceAllLiteral(tokens[i], replacement_, i == 0 && strip_first_ ? "" : " ");
    }
  }
  void PieceBytes(std::string& token) const override {
    ReplaceAllLiteral(token, replacement_, " ");
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) {
          t.erase(0, prefix_.size());
        } else {
          t = " " + t;
        }
      }
      if (cleanup_) {
        for (const auto& [from, to] : kWordPieceCleanUp)
          ReplaceAllLiteral(t, from, to);
      }
    }
  }
  void PieceBytes(std::string& token) const override {
    if (token.compare(0, prefix_.size(), prefix_) == 0) {
      token.erase(0, prefix_.size());
    } else {
      token.insert(0, " ");
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      ReplaceAllLiteral(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
    }
  }
  void PieceBytes(std::string& token) const override { ReplaceAllLiteral(token, suffix_, " "); }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> items)
      : items_(std::move(items)) {}
  void DecodeChain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items_)
      d->DecodeChain(tokens);
  }
  void PieceBytes(std::string& token) const override {
    for (const auto& d : items_)
      d->PieceBytes(token);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> items_;
};

Error BadDecoder(const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "decoder " + what);
}

}  // namespace

std::string CleanUpTokenization(std::string s) {
  static constexpr std::pair<const char*, const char*> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules)
    ReplaceAllLiteral(s, from, to);
  return s;
}

Result<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& j,
                                              const std::unordered_set<std::string>* added,
                                              int depth) {
  if (depth > kMaxNesting) {
    return Error(ErrorCode::kInvalidRequest,
                 "decoder: Sequence nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }

  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return BadDecoder("must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder(added));
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (type == "Strip") {
    // content is one character (a Rust char in tokenizers): an empty one
    // would strip nothing `start` times over, up to 2^64 turns.
    const std::string content = j.at("content").get<std::string>();
    if (content.empty() || !IsValidUtf8(content) ||
        Utf8SeqLen(static_cast<unsigned char>(content[0])) != content.size()) {
      return BadDecoder("Strip: \"content\" must be one character");
    }
    const std::optional<size_t> start = CountOf(j, "start", 0);
    const std::optional<size_t> stop = CountOf(j, "stop", 0);
    if (!start || !stop)
      return BadDecoder("Strip: \"start\" and \"stop\" must be non-negative integers");
    return std::unique_ptr<Decoder>(new StripDecoder(content, *start, *stop));
  }
  if (type == "Replace") {
    auto p = ParsePattern(j.at("pattern"), "decoder Replace");
    if (!p.ok()) return std::move(p).error();
    return std::unique_ptr<Decoder>(
        new ReplaceDecoder(std::move(p).value(), j.at("content").get<std::string>()));
  }
  if (type == "Metaspace") {
    bool strip_first = true;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      strip_first = j["prepend_scheme"].get<std::string>() != "never";
    } else if (j.contains("add_prefix_space")) {
      strip_first = j["add_prefix_space"].get<bool>();
    }
    return std::unique_ptr<Decoder>(
        new MetaspaceDecoder(j.value("replacement", std::string("\xE2\x96\x81")), strip_first));
  }
  if (type == "WordPiece") {
    return std::unique_ptr<Decoder>(
        new WordPieceDecoder(j.value("prefix", std::string("##")), j.value("cleanup", true)));
  }
  if (type == "BPEDecoder") {
    return std::unique_ptr<Decoder>(new BpeSuffixDecoder(j.value("suffix", std::string("</w>"))));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> items;
    for (const auto& item : j.at("decoders")) {
      auto d = ParseDecoder(item, added, depth + 1);
      if (!d.ok()) return std::move(d).error();
      items.push_back(std::move(d).value());
    }
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(items)));
  }
  return Error(ErrorCode::kInvalidRequest, "unsupported decoder type \"" + type + "\"");
}

}  // namespace medq::tokenizer
