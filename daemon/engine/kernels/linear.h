// The engine's one entry point for dense layers. Every projection of the
// model goes through Linear(), so the fastest path for a device, dtype and
// shape is chosen in one place.
#pragma once

#include <torch/torch.h>

namespace medq::engine {

// Returns x · weightᵀ + bias.
//   x:      [..., in], float32 on CPU; on CUDA the model's compute dtype.
//   weight: [out, in], contiguous, on x's device; float32 or bfloat16 on CPU
//           (bf16 weights are read as bf16 and accumulated in float32).
//   bias:   [out] or an undefined tensor.
// The result has x's dtype and shape [..., out]. Thread-safety: pure function;
// may use LibTorch's intra-op thread pool.
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {});

}  // namespace medq::engine
