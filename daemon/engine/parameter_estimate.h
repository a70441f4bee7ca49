// The bytes a decoder's weights will hold once loaded (ModelInfo::
// parameter_bytes), from its config.json alone: for deciding before a load,
// and for tests that check a 7B model's budget without 7B of weights.
// Free of LibTorch. The loader's own count (ParameterBytes, model.h) is the
// truth; tests/engine/parameter_estimate_test.cc checks that the two agree on
// every fixture, dtype and quantization.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/engine/model_config.h"

namespace medq::engine {

// How the weights are held (what LoadModel decides from LoadOptions, the
// device and the checkpoint's dtype).
struct WeightLayout {
  int64_t matrix_element_bytes = 2;  // the weight dtype: 2 (bf16, fp16) or 4 (fp32)
  int64_t vector_element_bytes = 4;  // norms and biases, in the compute dtype
  std::string quantize = "none";     // LoadOptions::quantize: "none", "int8", "int4"
  int64_t quantize_group = 64;       // LoadOptions::quantize_group (int4)
  bool quantize_embeddings = false;  // LoadOptions::quantize_embeddings
  // A second, packed copy of the projections and lm_head (CPU, bf16,
  // LoadOptions::pack_for_batches, unquantized: packed_weights.h).
  bool packed = false;
  // On a GPU (device_quantized.h): an int4 lm_head is held in LibTorch's
  // layout beside the input embeddings in medq's, so a tied int4
  // vocabulary matrix counts twice.
  bool gpu_layout = false;
};

// The bytes of one [out, in] matrix held as `layout` says: out · in ·
// element bytes unquantized; int8 out · in + 4 · out (float32 row
// scales); int4 out · in / 2 + 4 · out · in / group (a bf16 scale and
// minimum a group). `quantized`: whether this matrix is quantized at all.
int64_t MatrixBytes(int64_t out, int64_t in, const WeightLayout& layout, bool quantized);

// Every tensor BuildWeights takes for `config` (embeddings, lm_head unless
// tied, each layer's stacked q/k/v, o, stacked gate/up and down projections,
// the norms, the biases and q/k norms the config has), the projections
// quantized as `layout` says, the vocabulary matrices too with
// quantize_embeddings, plus the packed copies. A tied lm_head counts once
// (twice in int4 on a GPU: gpu_layout).
int64_t EstimateParameterBytes(const ModelConfig& config, const WeightLayout& layout);

}  // namespace medq::engine
