// A tokenizer.json pattern: {"String": "..."} (matched literally) or
// {"Regex": "..."} (see regex.h). Used by Split, Replace and Strip.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/regex.h"

namespace medq::tokenizer {

class Pattern {
 public:
  static Pattern Literal(std::string s) {
    Pattern p;
    p.literal_ = std::move(s);
    return p;
  }
  static Pattern FromRegex(std::shared_ptr<const Regex> re) {
    Pattern p;
    p.regex_ = std::move(re);
    return p;
  }

  // Non-overlapping matches, left to right, as [begin, end) byte offsets.
  // Precondition: text is valid UTF-8. Thread-safe.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  // text with every match replaced by content.
  std::string ReplaceAll(std::string_view text, std::string_view content) const;

 private:
  Pattern() = default;
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

// Parses {"String": s} or {"Regex": r}; `component` names the owner in errors.
Result<Pattern> ParsePattern(const nlohmann::json& j, const std::string& component);

}  // namespace medq::tokenizer
