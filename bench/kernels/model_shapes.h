// The dense-layer shapes of the two models the decode target is set for, and
// llama.cpp's decode speed on this machine for each (from issue 3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace medq::bench {

struct MatrixShape {
  int64_t out;
  int64_t in;
};

struct ModelShape {
  std::string name;
  int64_t hidden;
  int64_t layers;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t intermediate;
  int64_t vocab;
  bool qkv_bias;               // Qwen2 has biases on q, k and v
  double llama_cpp_f32_tok_s;  // llama.cpp decode, F32 weights
  double llama_cpp_f16_tok_s;  // llama.cpp decode, F16 weights

  // One layer's projections in call order: q, k, v, o, gate, up, down.
  std::vector<MatrixShape> LayerMatrices() const {
    const int64_t q = heads * head_dim;
    const int64_t kv = kv_heads * head_dim;
    return {{q, hidden},           {kv, hidden},           {kv, hidden},
            {hidden, q},           {intermediate, hidden}, {intermediate, hidden},
            {hidden, intermediate}};
  }
  // The tied lm_head.
  MatrixShape LmHead() const { return {vocab, hidden}; }

  // Weight elements read per decoded token by the dense layers.
  int64_t ElementsPerToken() const {
    int64_t n = 0;
    for (const MatrixShape& m : LayerMatrices())
      n += m.out * m.in;
    return n * layers + vocab * hidden;
  }
};

inline std::vector<ModelShape> BenchModels() {
  return {
      {"SmolLM-135M", 576, 30, 9, 3, 64, 1536, 49152, false, 50.0, 85.0},
      {"Qwen2.5-0.5B", 896, 24, 14, 2, 64, 4864, 151936, true, 15.0, 25.0},
  };
}

// Every distinct matrix of the models above, small to large.
inline std::vector<MatrixShape> BenchMatrices() {
  return {{576, 576}, {192, 576}, {1536, 576}, {576, 1536}, {49152, 576},
          {896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {151936, 896}};
}

}  // namespace medq::bench
