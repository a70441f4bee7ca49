// Hugging Face tensor names -> ModelWeights: checks that every expected tensor
// is there with its shape and nothing unexpected is, then moves each to the
// device in its dtype.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "daemon/engine/checkpoint.h"
#include "daemon/engine/model.h"
#include "daemon/engine/prequantized_config.h"

namespace medq::engine {

struct WeightPlacement {
  at::Device device = at::kCPU;
  at::ScalarType weight_dtype = at::kFloat;   // embeddings and projection matrices
  at::ScalarType compute_dtype = at::kFloat;  // norms and biases
  // Not kNone: the projections come packed in 4 bits (config.json's
  // quantization_config) and are unpacked into medq's int4 (prequantized.h);
  // on the CPU (a GPU's model is moved there after: device_quantized.h).
  PrequantizedConfig prequantized;
};

// Consumes `tensors`. Failure: kInvalidRequest naming the tensor (and file):
// missing, unexpected, wrong shape or a non-float dtype.
Result<ModelWeights> BuildWeights(const ModelConfig& config,
                                  std::map<std::string, CheckpointTensor> tensors,
                                  const WeightPlacement& placement);

// Stacks q/k/v into qkv_proj (and gate/up into gate_up_proj), biases too,
// and re-points the separate tensors at row views of the stacked ones. Call
// after any of the separate tensors was replaced.
void FuseProjections(LayerWeights& layer);

// The projection matrix `module` ("q_proj", "k_proj", "v_proj", "o_proj",
// "gate_proj", "up_proj", "down_proj") of `layer`; nullptr for another name.
at::Tensor* ProjectionWeight(LayerWeights& layer, std::string_view module);

}  // namespace medq::engine
