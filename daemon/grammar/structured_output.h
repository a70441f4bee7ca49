// Structured output on the worker: a response format (common/response_format.h)
// compiled against one model's vocabulary into a grammar, and a matcher per
// sequence that the engine asks, before each draw, which tokens may come next
// (engine::TokenConstraint). The grammar engine is xgrammar's C++ core
// (scripts/setup-xgrammar); nothing outside this folder sees its types.
//
// Worker thread only. Compiled grammars are cached per schema (xgrammar's own
// cache, bounded), so a schema sent again costs a lookup.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/response_format.h"
#include "common/result.h"
#include "daemon/engine/engine.h"
#include "daemon/tokenizer/tokenizer.h"

namespace medq::grammar {

// Documents are written on one line with Python's json.dumps separators
// (", " and ": "): the form most training data and OpenAI's answers take,
// and no tokens a model can spend on blanks (with any whitespace allowed, a
// weak model fills its budget with it).
class StructuredOutput {
 public:
  // The vocabulary of `tokenizer` as bytes (Tokenizer::TokenBytes), for a
  // model whose logits have `vocab_size` entries; `stop_ids` end a run (the
  // only tokens allowed once a document is complete). Special added tokens
  // are never allowed inside a document. Failure: INVALID_REQUEST when the
  // tokenizer has more tokens than the model's vocabulary.
  static Result<std::unique_ptr<StructuredOutput>> Create(const tokenizer::Tokenizer& tokenizer,
                                                          int64_t vocab_size,
                                                          const std::vector<int32_t>& stop_ids);
  ~StructuredOutput();
  StructuredOutput(const StructuredOutput&) = delete;
  StructuredOutput& operator=(const StructuredOutput&) = delete;

  // A fresh constraint for one sequence; null for a text response format.
  // INVALID_REQUEST naming response_format when the grammar engine cannot
  // build the schema's grammar (a pattern it cannot read, a $ref cycle...).
  Result<std::shared_ptr<engine::TokenConstraint>> Constrain(const ResponseFormat& format);

  // Bytes the compiled grammars hold in the cache.
  int64_t CacheBytes() const;

 private:
  struct Impl;
  explicit StructuredOutput(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace medq::grammar
