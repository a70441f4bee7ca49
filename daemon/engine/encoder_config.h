// An encoder folder's config.json (BertModel, MPNetModel), parsed and checked
// into the numbers the encoder's forward pass needs. Free of LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace medq::engine {

enum class EncoderArch { kBert, kMpnet };

// The feed-forward activation (config.json's hidden_act).
enum class EncoderActivation { kGelu, kGeluTanh, kRelu };

struct EncoderConfig {
  EncoderArch arch = EncoderArch::kBert;
  std::string architecture;  // "BertModel" or "MPNetModel"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;                 // BERT's token_type_embeddings rows (0 for MPNet)
  int64_t relative_attention_num_buckets = 0;  // MPNet's relative_attention_bias rows
  int64_t pad_token_id = 0;                    // what Embed pads with
  double layer_norm_eps = 1e-12;
  EncoderActivation activation = EncoderActivation::kGelu;
  std::string torch_dtype;  // "bfloat16", "float16", "float32" or "" when absent

  // The longest sequence the position embeddings allow: BERT's positions are
  // 0 .. T-1; MPNet's start after its padding index 1 (transformers'
  // create_position_ids_from_input_ids), so T <= max_position_embeddings - 2.
  int64_t MaxSequence() const;
};

// MPNet's embeddings hard-code padding index 1 for position ids, whatever
// config.json's pad_token_id (transformers' MPNetEmbeddings.padding_idx).
inline constexpr int64_t kMpnetPaddingIdx = 1;
// transformers' MPNetEncoder buckets relative positions into 32 buckets
// (compute_position_bias's default), whatever relative_attention_num_buckets.
inline constexpr int64_t kMpnetBuckets = 32;

// Checks and converts a parsed config.json. `source` names the file in error
// messages. Failure: kInvalidRequest naming the file and key, or the
// architecture when it is neither BertModel nor MPNetModel.
Result<EncoderConfig> ParseEncoderConfig(const nlohmann::json& config, const std::string& source);

// Reads dir/config.json. Failure: kInvalidRequest when missing or wrong.
Result<EncoderConfig> LoadEncoderConfig(const std::filesystem::path& dir);

}  // namespace medq::engine
