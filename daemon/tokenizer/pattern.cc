#include "daemon/tokenizer/pattern.h"

#include <nlohmann/json.hpp>

namespace medq::tokenizer {

std::vector<std::pair<size_t, size_t>> Pattern::FindAll(std::string_view text) const {
  if (regex_ != nullptr) return regex_->FindAll(text);
  std::vector<std::pair<size_t, size_t>> out;
  if (literal_.empty()) return out;
  size_t pos = 0;
  while ((pos = text.find(literal_, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + literal_.size());
    pos += literal_.size();
  }
  return out;
}

std::string Pattern::ReplaceAll(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  for (const auto& [b, e] : FindAll(text)) {
    out.append(text.substr(prev, b - prev));
    out.append(content);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

Result<Pattern> ParsePattern(const nlohmann::json& j, const std::string& component) {
  if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    return Pattern::Literal(j["String"].get<std::string>());
  }
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    auto re = Regex::Compile(j["Regex"].get<std::string>());
    if (!re.ok()) {
      return Error(ErrorCode::kInvalidRequest, component + ": " + re.error().message);
    }
    return Pattern::FromRegex(std::shared_ptr<const Regex>(std::move(re).value()));
  }
  return Error(ErrorCode::kInvalidRequest,
               component + ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace medq::tokenizer
