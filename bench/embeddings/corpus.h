// The embedding benchmarks' texts, made deterministically and checked with
// the model's own tokenizer, so that every implementation (medq, the
// sentence-transformers peer, the daemon's clients) embeds the same strings.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/engine/embedding.h"
#include "daemon/tokenizer/tokenizer.h"

namespace medq::bench {

struct EmbedCorpus {
  std::string name;  // "short" or "tok128"
  std::vector<std::string> texts;
  std::vector<int> tokens;  // ids per text as the model sees it (special tokens included)
};

// What the model is given for `text`: lowercased first when the model asks
// for it (do_lower_case; ASCII only, which is all these corpora hold), the
// special tokens added, truncated to max_seq_length keeping the final id (as
// the Hugging Face tokenizer truncates a BertProcessing sequence).
std::vector<int32_t> TokenizeForEmbedding(const tokenizer::Tokenizer& tok,
                                          const engine::EmbeddingInfo& info,
                                          const std::string& text);

// `count` short sentences of 8 to 12 common English words each.
EmbedCorpus ShortCorpus(const tokenizer::Tokenizer& tok, const engine::EmbeddingInfo& info,
                        int count);

// `count` texts of exactly `length` ids each (special tokens included), of
// common words. Fails (kInternal) when a text cannot be made that long with
// the tokenizer, or when length exceeds max_seq_length.
Result<EmbedCorpus> FixedLengthCorpus(const tokenizer::Tokenizer& tok,
                                      const engine::EmbeddingInfo& info, int count, int length);

}  // namespace medq::bench
