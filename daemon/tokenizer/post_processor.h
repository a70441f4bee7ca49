// Post-processors: add the special tokens around one or two encoded
// sequences (TemplateProcessing, Bert/Roberta) when add_special_tokens is set.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/parse_limits.h"

namespace medq::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The final ids for sequence a (and b when not null). Thread-safe.
  virtual std::vector<int32_t> Process(const std::vector<int32_t>& a, const std::vector<int32_t>* b,
                                       bool add_special_tokens) const = 0;
};

// Builds the post-processor described by j (not null). Failure:
// kInvalidRequest naming the unsupported type or the bad field.
// depth: Sequence nesting so far (deeper than kMaxNesting is refused).
Result<std::unique_ptr<PostProcessor>> ParsePostProcessor(const nlohmann::json& j, int depth = 0);

}  // namespace medq::tokenizer
