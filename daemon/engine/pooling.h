// sentence-transformers' Pooling module: its config (1_Pooling/config.json)
// and the pooling of token embeddings into one vector per sequence.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace medq::engine {

enum class PoolingMode { kCls, kMax, kMean, kMeanSqrtLen, kWeightedMean, kLastToken };

struct PoolingConfig {
  // In the order their vectors are concatenated (sentence-transformers'
  // order); never empty.
  std::vector<PoolingMode> modes = {PoolingMode::kMean};
  bool include_prompt = true;
  // The token embedding width the config names (0 when it names none).
  int64_t embedding_dimension = 0;
};

// Parses a Pooling config: the current form ("pooling_mode": a name or a list
// of names, "embedding_dimension") or the legacy one ("pooling_mode_*_token(s)"
// booleans, "word_embedding_dimension"); no mode at all means mean, as
// sentence-transformers. Failure: kInvalidRequest naming `source` and the key.
Result<PoolingConfig> ParsePoolingConfig(const nlohmann::json& config, const std::string& source);

// "mean", "cls+mean", ... (sentence-transformers' names, '+' between them).
std::string PoolingName(const PoolingConfig& config);

// Pools token embeddings `hidden` [B, T, H] under `mask` [B, T] (1 for real
// tokens, 0 for padding; real tokens first) as sentence-transformers'
// Pooling does, in float32: returns [B, H * modes].
at::Tensor Pool(const PoolingConfig& config, const at::Tensor& hidden, const at::Tensor& mask);

}  // namespace medq::engine
