// Linear() for quantized weights in the form a GPU holds them
// (device_quantized.h in the engine): int8 rows on a CUDA device, and
// LibTorch's int4 layout on a CUDA device or, for CI, on the CPU.
#pragma once

#include <torch/torch.h>

namespace medq::engine::kernels {

// int8 weights on a CUDA device: int8 [out, in] contiguous, float32 scales
// [out] beside them, x on that device in any float dtype.
bool IsDeviceInt8(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scale);

// x · (weight · diag(scale))ᵀ + bias: up to 16 rows (and k a multiple of 16)
// medq's GEMV kernel (cuda/quantized_kernels.h); otherwise the matrix
// dequantized to x's dtype once and at::linear. Only in a CUDA build;
// elsewhere IsDeviceInt8 is never true.
torch::Tensor DeviceInt8Linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& scale, const torch::Tensor& bias);

// LibTorch's int4 layout: on a CUDA device int32 [out / 8, in / (16 t), 32,
// t / 2] with bf16 scale-and-zeros [groups, out, 2]; on the CPU uint8 [out,
// in / 2] with float32 scale-and-zeros [groups, out, 2] (medq's own int4 has
// bf16 parameters [out, groups, 2]: the two never match each other).
bool IsTorchInt4(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scale);

// x · wᵀ + bias for that layout, through LibTorch's _weight_int4pack_mm (on
// a GPU x goes through bf16, the kernel's one input dtype; on the CPU x's
// own dtype), the result in x's dtype and shape [..., out].
torch::Tensor TorchInt4Linear(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& scale, const torch::Tensor& bias);

}  // namespace medq::engine::kernels
