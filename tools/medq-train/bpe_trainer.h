// Byte-level BPE training, as GPT-2 and Hugging Face `tokenizers` define the
// model: text is split with the ByteLevel pre-tokenizer's pattern, each piece
// becomes its bytes (in GPT-2's byte-to-unicode alphabet), and the most
// frequent adjacent pair is merged until the vocabulary is full. The result is
// written as a standard tokenizer.json that medq (and `tokenizers`) loads.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace medq::train {

struct BpeVocabulary {
  // Token strings by id: the special tokens, then the 256 byte symbols in byte
  // order, then one token per merge in merge order.
  std::vector<std::string> tokens;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  size_t num_special = 0;
};

// Learns merges from `documents` until the vocabulary has vocab_size tokens
// (special tokens included) or no pair occurs twice. Deterministic: ties go
// to the pair whose token strings sort first. Failure: kInvalidRequest when
// vocab_size cannot hold the special tokens and the byte alphabet.
Result<BpeVocabulary> TrainByteLevelBpe(const std::vector<std::string>& documents,
                                        size_t vocab_size,
                                        const std::vector<std::string>& special_tokens);

// tokenizer.json text for the vocabulary: BPE model, ByteLevel pre-tokenizer
// (no prefix space, GPT-2 regex) and decoder, the special tokens as added
// tokens, no post-processor (nothing is added to encoded text).
std::string TokenizerJson(const BpeVocabulary& vocabulary);

// tokenizer_config.json text naming `special` (the vocabulary's first token)
// as BOS and EOS, without clean-up of spaces on decode.
std::string TokenizerConfigJson(const BpeVocabulary& vocabulary);

}  // namespace medq::train
