// Random-weight Hugging Face model directories with the exact shapes of real
// models, for benchmarking without downloading anything.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace medq::bench {

struct ModelShape {
  std::string name;          // e.g. "SmolLM-135M"
  std::string architecture;  // "LlamaForCausalLM" or "Qwen2ForCausalLM"
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, intermediate = 0, vocab = 0;
  bool qkv_bias = false;
  bool tied = true;
  double rope_theta = 10000.0;
};

// SmolLM-135M and Qwen2.5-0.5B.
std::vector<ModelShape> BenchShapes();

// Mistral-7B (v0.3's shape: 32768 tokens, untied): 14.5 GB of random bf16
// weights, written and loaded only where a benchmark names it (issue 44's
// int4 target on a GPU: the 7B shape).
std::vector<ModelShape> LargeShapes();

// Writes config.json and model.safetensors (BF16, uniform random weights,
// norms 1) for `shape` into `dir` (created).
Status WriteRandomModel(const ModelShape& shape, const std::filesystem::path& dir);

}  // namespace medq::bench
