#include "daemon/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/tokenizer/byte_level.h"
#include "daemon/tokenizer/pattern.h"
#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {
namespace {

// Rust regex's \w: Alphabetic, marks, decimal digits, connectors, joiners.
constexpr const char* kWhitespacePattern =
    R"([\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}]+|[^\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}\s]+)";

template <typename F>
void ForEachPiece(std::vector<Piece>& pieces, F split_one) {
  std::vector<Piece> out;
  out.reserve(pieces.size() * 2);
  for (const auto& p : pieces)
    split_one(p, out);
  pieces = std::move(out);
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(Pattern p, SplitBehavior b, bool invert)
      : pattern_(std::move(p)), behavior_(b), invert_(invert) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    ForEachPiece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      SplitPiece(p, SpansFromMatches(p.text.size(), pattern_.FindAll(p.text)), behavior_, invert_,
                 out);
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::shared_ptr<const Regex> re)
      : add_prefix_space_(add_prefix_space), regex_(std::move(re)) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    ForEachPiece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      Piece src = p;
      if (add_prefix_space_ && (src.text.empty() || src.text[0] != ' ')) src.text = " " + src.text;
      const size_t first = out.size();
      if (regex_ != nullptr) {
        SplitPiece(src, SpansFromMatches(src.text.size(), regex_->FindAll(src.text)),
                   SplitBehavior::kIsolated, false, out);
      } else if (!src.text.empty()) {
        out.push_back(std::move(src));
      }
      for (size_t i = first; i < out.size(); ++i) {
        std::string mapped;
        mapped.reserve(out[i].text.size() * 2);
        AppendByteLevel(out[i].text, mapped);
        out[i].text = std::move(mapped);
      }
    });
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    ForEachPiece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      Piece src{Pattern::Literal(" ").ReplaceAll(p.text, replacement_), p.at_origin};
      const bool starts = src.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && src.at_origin))) {
        src.text = replacement_ + src.text;
      }
      if (split_) {
        SplitPiece(
            src,
            SpansFromMatches(src.text.size(), Pattern::Literal(replacement_).FindAll(src.text)),
            SplitBehavior::kMergedWithNext, false, out);
      } else if (!src.text.empty()) {
        out.push_back(std::move(src));
      }
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

// Splits on characters chosen by a predicate (Digits, Punctuation,
// WhitespaceSplit, CharDelimiterSplit).
template <typename Pred>
class CharSplitPreTokenizer : public PreTokenizer {
 public:
  CharSplitPreTokenizer(Pred pred, SplitBehavior b) : pred_(pred), behavior_(b) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    ForEachPiece(pieces, [&](const Piece& p, std::vector<Piece>& out) {
      SplitPiece(p, SpansFromCharPredicate(p.text, pred_), behavior_, false, out);
    });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> MakeCharSplit(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplitPreTokenizer<Pred>>(pred, b);
}

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> items)
      : items_(std::move(items)) {}
  void PreTokenize(std::vector<Piece>& pieces) const override {
    for (const auto& p : items_)
      p->PreTokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

Result<std::shared_ptr<const Regex>> CompileShared(std::string_view pattern) {
  auto re = Regex::Compile(pattern);
  if (!re.ok()) return std::move(re).error();
  return std::shared_ptr<const Regex>(std::move(re).value());
}

Error BadPreTokenizer(const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "pre_tokenizer " + what);
}

}  // namespace

Result<SplitBehavior> ParseSplitBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return BadPreTokenizer("split behavior \"" + name + "\" is not supported");
}

Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& j, int depth) {
  if (depth > kMaxNesting) {
    return Error(ErrorCode::kInvalidRequest, "pre_tokenizer: Sequence nested deeper than " +
                                                 std::to_string(kMaxNesting) + " levels");
  }

  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return BadPreTokenizer("must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    for (const auto& item : j.at("pretokenizers")) {
      auto p = ParsePreTokenizer(item, depth + 1);
      if (!p.ok()) return std::move(p).error();
      items.push_back(std::move(p).value());
    }
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(items)));
  }
  if (type == "Split") {
    auto pattern = ParsePattern(j.at("pattern"), "pre_tokenizer Split");
    if (!pattern.ok()) return std::move(pattern).error();
    auto behavior = ParseSplitBehavior(j.at("behavior").get<std::string>());
    if (!behavior.ok()) return std::move(behavior).error();
    return std::unique_ptr<PreTokenizer>(
        new SplitPreTokenizer(std::move(pattern).value(), *behavior, j.value("invert", false)));
  }
  if (type == "ByteLevel") {
    std::shared_ptr<const Regex> re;
    if (j.value("use_regex", true)) {
      auto compiled = CompileShared(kByteLevelPattern);
      if (!compiled.ok()) return std::move(compiled).error();
      re = std::move(compiled).value();
    }
    return std::unique_ptr<PreTokenizer>(
        new ByteLevelPreTokenizer(j.value("add_prefix_space", true), std::move(re)));
  }
  if (type == "Metaspace") {
    std::string replacement = j.value("replacement", std::string("\xE2\x96\x81"));
    if (replacement.empty()) return BadPreTokenizer("Metaspace: empty \"replacement\"");
    PrependScheme scheme = PrependScheme::kAlways;
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      const std::string s = j["prepend_scheme"].get<std::string>();
      if (s == "always") {
        scheme = PrependScheme::kAlways;
      } else if (s == "first") {
        scheme = PrependScheme::kFirst;
      } else if (s == "never") {
        scheme = PrependScheme::kNever;
      } else {
        return BadPreTokenizer("Metaspace: prepend_scheme \"" + s + "\" is not supported");
      }
    } else if (j.contains("add_prefix_space")) {
      scheme = j["add_prefix_space"].get<bool>() ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    return std::unique_ptr<PreTokenizer>(
        new MetaspacePreTokenizer(std::move(replacement), scheme, j.value("split", true)));
  }
  if (type == "Digits") {
    const bool individual = j.value("individual_digits", false);
    return MakeCharSplit([](char32_t c) { return IsNumeric(c); },
                         individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    auto behavior = ParseSplitBehavior(j.value("behavior", std::string("Isolated")));
    if (!behavior.ok()) return std::move(behavior).error();
    return MakeCharSplit([](char32_t c) { return IsPunctuation(c); }, *behavior);
  }
  if (type == "WhitespaceSplit") {
    return MakeCharSplit([](char32_t c) { return IsWhitespace(c); }, SplitBehavior::kRemoved);
  }
  if (type == "CharDelimiterSplit") {
    const std::string d = j.at("delimiter").get<std::string>();
    size_t len = 0;
    if (d.empty()) return BadPreTokenizer("CharDelimiterSplit: empty \"delimiter\"");
    const char32_t delim = DecodeAt(d, 0, &len);
    return MakeCharSplit([delim](char32_t c) { return c == delim; }, SplitBehavior::kRemoved);
  }
  if (type == "Whitespace") {
    auto re = CompileShared(kWhitespacePattern);
    if (!re.ok()) return std::move(re).error();
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(
        Pattern::FromRegex(std::move(re).value()), SplitBehavior::kRemoved, true));
  }
  if (type == "BertPreTokenizer") {
    std::vector<std::unique_ptr<PreTokenizer>> items;
    items.push_back(
        MakeCharSplit([](char32_t c) { return IsWhitespace(c); }, SplitBehavior::kRemoved));
    items.push_back(
        MakeCharSplit([](char32_t c) { return IsPunctuation(c); }, SplitBehavior::kIsolated));
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(items)));
  }
  return Error(ErrorCode::kInvalidRequest, "unsupported pre_tokenizer type \"" + type + "\"");
}

}  // namespace medq::tokenizer
