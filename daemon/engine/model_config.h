// A model directory's config.json (+ generation_config.json), parsed and
// checked into the few numbers the transformer needs. Free of LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/engine/prequantized_config.h"

namespace medq::engine {

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  std::optional<int64_t> sliding_window;  // attention looks back at most this many tokens
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;    // q/k/v projections have biases (Qwen2, attention_bias)
  bool o_bias = false;      // o_proj has a bias (Llama/Mistral attention_bias)
  bool mlp_bias = false;    // gate/up/down have biases (Llama mlp_bias)
  bool qk_norm = false;     // per-head RMSNorm of q and k before RoPE (Qwen3)
  std::string torch_dtype;  // "bfloat16", "float16", "float32" or "" when absent
  std::vector<int32_t> eos_ids;
  std::optional<int32_t> bos_id;
  // quantization_config: a pre-quantized 4-bit checkpoint (AWQ, GPTQ), or
  // kNone (prequantized_config.h).
  PrequantizedConfig prequantized;
};

// The architectures LoadModel accepts, as a comma-separated list for messages.
std::string SupportedArchitectures();

// Checks and converts parsed JSON. `generation_config` may be null (file
// absent); its eos_token_id (int or list) replaces config.json's when present,
// as transformers does. `source` names the file in error messages.
// Failure: kInvalidRequest naming the file and key.
Result<ModelConfig> ParseModelConfig(const nlohmann::json& config,
                                     const nlohmann::json* generation_config,
                                     const std::string& source);

// Reads dir/config.json and, when present, dir/generation_config.json.
// Failure: kModelNotFound when the directory does not exist, kInvalidRequest
// when config.json is missing, unreadable or wrong.
Result<ModelConfig> LoadModelConfig(const std::filesystem::path& dir);

// Reads a whole JSON file. Failure: kInvalidRequest naming the file.
Result<nlohmann::json> ReadJsonFile(const std::filesystem::path& path);

}  // namespace medq::engine
