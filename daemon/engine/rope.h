// Rotary position embeddings as transformers computes them (default, linear and
// llama3 scaling).
#pragma once

#include <ATen/ATen.h>

#include "daemon/engine/model_config.h"

namespace medq::engine {

// Inverse frequencies [head_dim / 2], float32 on CPU, after rope_scaling.
at::Tensor RopeInvFreq(const ModelConfig& config);

// cos and sin tables [positions, head_dim] for positions 0..positions-1,
// computed in float32 then cast to `dtype` on `device`.
void RopeTables(const at::Tensor& inv_freq, int64_t positions, at::Device device,
                at::ScalarType dtype, at::Tensor* cos, at::Tensor* sin);

// x * cos + rotate_half(x) * sin for x [..., T, head_dim], cos/sin [T,
// head_dim] or any shape that broadcasts against x (a row of positions per
// batch row: [B, 1, T, head_dim]).
at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace medq::engine
