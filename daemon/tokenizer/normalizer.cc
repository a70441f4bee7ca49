#include "daemon/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "daemon/tokenizer/pattern.h"
#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

namespace {

std::string NormalizeSpan(std::string_view s, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          static_cast<utf8proc_ssize_t>(s.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  if (n < 0 || out == nullptr) return std::string(s);  // only on invalid UTF-8, never passed
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace

std::string UnicodeNormalize(const std::string& s, const std::string& form) {
  int options = UTF8PROC_STABLE;
  if (form == "NFC") options |= UTF8PROC_COMPOSE;
  if (form == "NFD") options |= UTF8PROC_DECOMPOSE;
  if (form == "NFKC") options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
  if (form == "NFKD") options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  // ASCII is unchanged by every form, and an ASCII character is never the
  // second half of a composition, so only spans made of one ASCII character
  // (a possible base) plus the non-ASCII run after it need utf8proc.
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && static_cast<unsigned char>(s[j]) < 0x80)
      ++j;
    if (j == s.size()) {
      out.append(s, i, j - i);
      break;
    }
    const size_t span_begin = j > i ? j - 1 : j;  // keep the ASCII base with its marks
    out.append(s, i, span_begin - i);
    size_t k = j;
    while (k < s.size() && static_cast<unsigned char>(s[k]) >= 0x80)
      ++k;
    out += NormalizeSpan(std::string_view(s).substr(span_begin, k - span_begin), options);
    i = k;
  }
  return out;
}

namespace {

class UnicodeNormalizer : public Normalizer {
 public:
  explicit UnicodeNormalizer(std::string form) : form_(std::move(form)) {}
  void Normalize(std::string& s) const override { s = UnicodeNormalize(s, form_); }

 private:
  std::string form_;
};

// Rust char::to_lowercase per character; utf8proc gives the simple mapping,
// so the one multi-character mapping (U+0130) is handled here.
class LowercaseNormalizer : public Normalizer {
 public:
  void Normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      size_t len = 1;
      const char32_t c = DecodeAt(s, i, &len);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
      } else if (c == 0x130) {
        out += "i\xCC\x87";
      } else {
        AppendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), out);
      }
      i += len;
    }
    s = std::move(out);
  }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void Normalize(std::string& s) const override {
    size_t b = 0;
    size_t e = s.size();
    if (left_) {
      while (b < e) {
        size_t len = 1;
        if (!IsWhitespace(DecodeAt(s, b, &len))) break;
        b += len;
      }
    }
    if (right_) {
      while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80)
          --start;
        size_t len = 1;
        if (!IsWhitespace(DecodeAt(s, start, &len))) break;
        e = start;
      }
    }
    s = s.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string p) : prepend_(std::move(p)) {}
  void Normalize(std::string& s) const override {
    if (!s.empty()) s = prepend_ + s;
  }

 private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(Pattern p, std::string content)
      : pattern_(std::move(p)), content_(std::move(content)) {}
  void Normalize(std::string& s) const override { s = pattern_.ReplaceAll(s, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

// BERT's normalizer: drop control characters and turn whitespace into
// spaces (clean_text), put spaces around CJK ideographs, strip accents (NFD,
// then drop non-spacing marks), lowercase.
class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool chinese, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        chinese_(chinese),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}
  void Normalize(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
      size_t len = 1;
      const char32_t c = DecodeAt(s, i, &len);
      i += len;
      if (clean_text_) {
        if (c == 0 || c == 0xFFFD || IsOther(c)) continue;
        if (c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c)) {
          out.push_back(' ');
          continue;
        }
      }
      if (chinese_ && IsChineseChar(c)) {
        out.push_back(' ');
        AppendUtf8(c, out);
        out.push_back(' ');
        continue;
      }
      AppendUtf8(c, out);
    }
    if (strip_accents_) {
      const std::string nfd = UnicodeNormalize(out, "NFD");
      out.clear();
      for (size_t k = 0; k < nfd.size();) {
        size_t len = 1;
        const char32_t c = DecodeAt(nfd, k, &len);
        if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) != UTF8PROC_CATEGORY_MN) {
          out.append(nfd, k, len);
        }
        k += len;
      }
    }
    if (lowercase_) lowercase_normalizer_.Normalize(out);
    s = std::move(out);
  }

 private:
  // Rust char::is_other minus tab, newline and carriage return.
  static bool IsOther(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return false;
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO ||
           cat == UTF8PROC_CATEGORY_CN;
  }
  static bool IsChineseChar(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }
  bool clean_text_, chinese_, strip_accents_, lowercase_;
  LowercaseNormalizer lowercase_normalizer_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> n) : items_(std::move(n)) {}
  void Normalize(std::string& s) const override {
    for (const auto& n : items_)
      n->Normalize(s);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

Error Unsupported(const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "unsupported normalizer " + what);
}

}  // namespace

Result<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j, int depth) {
  if (depth > kMaxNesting) {
    return Error(ErrorCode::kInvalidRequest, "normalizer: Sequence nested deeper than " +
                                                 std::to_string(kMaxNesting) + " levels");
  }

  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Error(ErrorCode::kInvalidRequest, "normalizer: expected an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    return std::unique_ptr<Normalizer>(new UnicodeNormalizer(type));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (type == "BertNormalizer") {
    const bool lowercase = j.value("lowercase", true);
    // strip_accents: null means "same as lowercase".
    const bool strip = j.contains("strip_accents") && j["strip_accents"].is_boolean()
                           ? j["strip_accents"].get<bool>()
                           : lowercase;
    return std::unique_ptr<Normalizer>(new BertNormalizer(
        j.value("clean_text", true), j.value("handle_chinese_chars", true), strip, lowercase));
  }
  if (type == "Strip") {
    return std::unique_ptr<Normalizer>(
        new StripNormalizer(j.value("strip_left", true), j.value("strip_right", true)));
  }
  if (type == "Prepend") {
    return std::unique_ptr<Normalizer>(new PrependNormalizer(j.at("prepend").get<std::string>()));
  }
  if (type == "Replace") {
    auto p = ParsePattern(j.at("pattern"), "normalizer Replace");
    if (!p.ok()) return std::move(p).error();
    return std::unique_ptr<Normalizer>(
        new ReplaceNormalizer(std::move(p).value(), j.at("content").get<std::string>()));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> items;
    for (const auto& item : j.at("normalizers")) {
      auto n = ParseNormalizer(item, depth + 1);
      if (!n.ok()) return std::move(n).error();
      items.push_back(std::move(n).value());
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(items)));
  }
  return Unsupported("type \"" + type + "\"");
}

}  // namespace medq::tokenizer
