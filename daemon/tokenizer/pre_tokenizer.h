// Pre-tokenizers: split each normalized segment into the pieces ("words")
// that the model tokenizes independently.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/parse_limits.h"
#include "daemon/tokenizer/split.h"

namespace medq::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces pieces by their split (and possibly rewritten) forms, in order;
  // empty pieces are dropped. Thread-safe (implementations are immutable).
  virtual void PreTokenize(std::vector<Piece>& pieces) const = 0;
};

// Builds the pre-tokenizer described by j (not null). Failure: kInvalidRequest
// naming the unsupported type or the bad field.
// depth: Sequence nesting so far (deeper than kMaxNesting is refused).
Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const nlohmann::json& j, int depth = 0);

// Parses a Split "behavior" name ("Removed", "Isolated", ...).
Result<SplitBehavior> ParseSplitBehavior(const std::string& name);

}  // namespace medq::tokenizer
