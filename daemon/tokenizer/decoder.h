// Decoders: turn the token strings of a Decode() call back into text.
#pragma once

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/parse_limits.h"

namespace medq::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites tokens in place (as the Hugging Face decode_chain); the final
  // text is their concatenation. Output strings are valid UTF-8: invalid
  // byte sequences become U+FFFD. Thread-safe.
  virtual void DecodeChain(std::vector<std::string>& tokens) const = 0;
  // Rewrites one vocabulary token into the bytes it adds to a text when it
  // stands in the middle (neither first nor last): no UTF-8 repair, nothing
  // stripped at the text's ends. A token that is part of a character gives
  // that part. What a grammar matches tokens against (Tokenizer::TokenBytes).
  virtual void PieceBytes(std::string& token) const = 0;
};

// Builds the decoder described by j (not null). added_tokens: the contents of
// all added tokens (ByteLevel emits them verbatim); it must outlive the
// decoder. Failure: kInvalidRequest naming the unsupported type or bad field.
// depth: Sequence nesting so far (deeper than kMaxNesting is refused).
Result<std::unique_ptr<Decoder>> ParseDecoder(const nlohmann::json& j,
                                              const std::unordered_set<std::string>* added_tokens,
                                              int depth = 0);

// transformers' clean_up_tokenization (" ." -> "." and so on), as used when
// tokenizer_config.json sets clean_up_tokenization_spaces.
std::string CleanUpTokenization(std::string s);

}  // namespace medq::tokenizer
