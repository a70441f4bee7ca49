// A sentence-transformers folder's layout: which modules it chains
// (modules.json), where the encoder lives, its Pooling config, whether it
// normalizes, and its sequence settings. Free of LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/result.h"
#include "daemon/engine/pooling.h"

namespace medq::engine {

struct SentenceTransformersLayout {
  std::filesystem::path encoder_dir;  // the Transformer module's folder (config.json, weights)
  PoolingConfig pooling;
  bool normalize = false;
  bool do_lower_case = false;
  // sentence_bert_config.json's max_seq_length, else tokenizer_config.json's
  // model_max_length (where sentence-transformers 5+ keeps it); nullopt when
  // neither names one.
  std::optional<int64_t> max_seq_length;
};

// Reads dir/modules.json and the files of the modules it lists: a Transformer
// first, then a Pooling module (its config.json), then an optional
// Normalize. A folder without modules.json is a plain transformers model:
// encoder in dir, mean pooling, no normalization (sentence-transformers'
// default for such a folder). Failure: kModelNotFound (no such directory),
// kInvalidRequest naming the file: malformed JSON, a module type other than
// those three (named), no Pooling module or its config missing.
Result<SentenceTransformersLayout> ReadSentenceTransformersLayout(const std::filesystem::path& dir);

}  // namespace medq::engine
