// The loaded model behind the opaque engine::Model handle (internal: LibTorch
// types). Immutable after load but for its cache of decode graphs; copies
// share tensor storage.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "daemon/engine/engine.h"
#include "daemon/engine/model_config.h"

namespace medq::engine {

class DecodeGraphs;  // decode_graph.h

// How a model's projection matrices are held (LoadOptions::quantize,
// quantize.h): as they were loaded, int8 with one scale per row, or int4 in
// groups with a scale and minimum each.
enum class Quantization { kNone, kInt8, kInt4 };

// One decoder layer. Undefined tensors are absent (biases, q/k norms).
// q/k/v rows are stacked in qkv_proj and gate/up rows in gate_up_proj, so a
// decode step makes 4 Linear calls per layer instead of 7; q_proj, k_proj,
// v_proj, gate_proj, up_proj (and their biases) are row views into them.
struct LayerWeights {
  at::Tensor qkv_proj, qkv_bias;
  at::Tensor gate_up_proj, gate_up_bias;
  at::Tensor input_norm, post_norm;
  at::Tensor q_proj, k_proj, v_proj, o_proj;
  at::Tensor q_bias, k_bias, v_bias, o_bias;
  at::Tensor q_norm, k_norm;
  at::Tensor gate_proj, up_proj, down_proj;
  at::Tensor gate_bias, up_bias, down_bias;
  // With LoadOptions::pack_for_batches on a CPU bf16 model: qkv_proj,
  // o_proj, gate_up_proj and down_proj packed again in tiles of 16 rows
  // (packed_weights.h), which the CPU decode step reads instead; otherwise
  // undefined.
  at::Tensor qkv_packed, o_packed, gate_up_packed, down_packed;
  // With Quantization::kInt8: qkv_proj, o_proj, gate_up_proj and down_proj
  // (and the row views into them) are int8, and these their float32 row
  // scales [out] (quantize.h). With kInt4: the matrices are uint8 [out, in /
  // 2], two weights a byte, and these their bf16 group parameters [out,
  // in / group, 2] (scale and minimum). Otherwise undefined.
  at::Tensor qkv_scale, o_scale, gate_up_scale, down_scale;
};

struct ModelWeights {
  at::Tensor embed;           // [vocab, hidden], weight dtype
  at::Tensor norm;            // [hidden]
  at::Tensor lm_head;         // [vocab, hidden]; the same tensor as embed when tied
  at::Tensor lm_head_packed;  // as LayerWeights' *_packed
  // With LoadOptions::quantize_embeddings (quantized_embeddings.h): embed and
  // lm_head are held as the projections are (int8 or int4, quantize.h) and
  // these are their scales or group parameters, the same tensors as each
  // other's when tied (one matrix, quantized once); otherwise undefined.
  at::Tensor embed_scale, lm_head_scale;
  std::vector<LayerWeights> layers;
};

class Model {
 public:
  std::filesystem::path dir;
  ModelConfig config;
  ModelInfo info;
  ModelWeights weights;
  at::Device device = at::kCPU;
  at::ScalarType weight_dtype = at::kFloat;         // projections and embeddings in memory
  at::ScalarType compute_dtype = at::kFloat;        // activations, norms, biases, KV cache
  Quantization quantization = Quantization::kNone;  // the projections (LayerWeights)
  // The int4 projections are in LibTorch's layout (device_quantized.h), as
  // on a GPU: only Linear() reads them, so the model takes the device loop
  // (generate.h: UsesDeviceLoop) wherever it is.
  bool device_quantized_form = false;
  at::Tensor inv_freq;  // [head_dim / 2] float32 on CPU, scaled
  // Held while the weights are on a CUDA device (see CudaPresence); copies
  // of the model share it.
  std::shared_ptr<const void> cuda_presence;
  // The model's captured decode steps (decode_graph.h: DecodeGraphsOf): the
  // one part that changes after load, a cache the worker thread fills at
  // first use. Declared last, so that it goes before the weights it reads.
  mutable std::shared_ptr<DecodeGraphs> decode_graphs;
};

// Bytes held by the model's weights, counting shared storage once.
int64_t ParameterBytes(const ModelWeights& weights);

}  // namespace medq::engine
