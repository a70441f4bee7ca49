// Normalizers: the first stage of the tokenizer.json pipeline, applied to
// each text segment between added tokens.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/parse_limits.h"

namespace medq::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // Rewrites s in place. Precondition: s is valid UTF-8; it stays valid.
  // Thread-safe (implementations are immutable).
  virtual void Normalize(std::string& s) const = 0;
};

// Builds the normalizer described by j (a tokenizer.json "normalizer" value,
// not null). Failure: kInvalidRequest naming the unsupported type or the bad
// field.
// depth: Sequence nesting so far (deeper than kMaxNesting is refused).
Result<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j, int depth = 0);

// Applies a Unicode normalization form: "NFC", "NFD", "NFKC" or "NFKD".
std::string UnicodeNormalize(const std::string& s, const std::string& form);

}  // namespace medq::tokenizer
