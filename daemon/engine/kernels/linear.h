// The engine's one entry point for dense layers. Every projection of the
// model goes through Linear(), so the fastest path for a device, dtype and
// shape is chosen in one place.
#pragma once

#include <torch/torch.h>

#include "daemon/engine/kernels/kernel_choice.h"

namespace medq::engine {

// Returns x · weightᵀ + bias.
//   x:      [..., in], float32 on CPU; on CUDA the model's compute dtype.
//   weight: [out, in], contiguous, on x's device; float32 or bfloat16 on CPU
//           (bf16 weights are read as bf16 and accumulated in float32).
//   bias:   [out] or an undefined tensor.
// The result has x's dtype and shape [..., out]. Thread-safety: pure function;
// may use the kernels' threads (kernels::KernelThreads()) and LibTorch's or
// BLAS's own.
//
// Arguments outside this contract take the baseline path (at::linear after
// converting the weights to x's dtype), which throws c10::Error for shapes
// that do not fit, like any LibTorch op; the engine catches c10::Error once
// per job. On CPU with float32 x the fast paths are (see SelectLinearPath):
//   one row of x (x is [in], [1, in], [1, 1, in], ...):
//     float32 or bf16 weights -> own matrix-vector kernel, output rows split
//     across the kernels' threads, bias added in the same pass;
//   several rows: float32 weights -> at::linear (BLAS GEMM);
//     bf16 weights -> up to kTiledGemmMinRows - 1 rows, own kernel that reads
//     each weight row once for all rows; from kTiledGemmMinRows rows, weight
//     tiles converted to float32 and multiplied with BLAS GEMM.
// Threads: the own kernels split output rows over kernels::KernelThreads()
// (default: one per core) with ShareWork (work_sharing.h: 64 KiB chunks;
// never waits for a helper that has not started, unlike an OpenMP region),
// and results are bitwise the same for any thread count. Calls that use
// helper threads are serialized process-wide. bench/kernels/README.md has the
// measurements.
// Autograd: when grad mode is on and an argument requires grad, the baseline
// path is taken, so gradients stay correct; inference runs in InferenceMode.
//
// int8 weights (torch::kChar, weight-only symmetric quantization, quantize.h
// in the engine) need `scale`, their float32 row scales [out]: the product is
// then x · (weight · diag(scale))ᵀ + bias. On CPU with float32 x, any number
// of rows takes the own int8 kernels: x rounded to int8 blocks of 32, integer
// multiply-adds, each row of x computed exactly as alone (a row's product
// does not depend on the other rows of a prefill chunk or a decode batch);
// anything else (another device, autograd) the baseline on the dequantized
// matrix. Other dtypes ignore `scale`.
// int4 weights (torch::kByte [out, in / 2], two weights a byte in groups,
// quantize.h) take as `scale` their bf16 group parameters [out, in / group,
// 2] (scale and minimum): any number of rows takes the own int4 kernels, as
// int8's, anything else the baseline on the dequantized matrix (CPU only).
// On a GPU (device_quantized.h in the engine): int8 weights on the device
// with float32 row scales take medq's int8 GEMV for up to 16 rows and a
// dequantized GEMM beyond; int4 weights in LibTorch's layout (there, or on
// the CPU for CI) take LibTorch's _weight_int4pack_mm (kernels/device_linear.h).
torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias = {}, const torch::Tensor& scale = {});

// The implementation Linear() takes for given arguments.
enum class LinearPath {
  kBaseline,       // at::linear on weights converted to x's dtype (any device)
  kGemmF32,        // CPU, float32 weights, several rows: at::linear (BLAS GEMM)
  kMatVecF32,      // CPU, float32 weights, one row: own kernel
  kMatVecBf16,     // CPU, bf16 weights, one row: own kernel
  kMatMulBf16,     // CPU, bf16 weights, 2 .. kTiledGemmMinRows - 1 rows: own kernel
  kTiledGemmBf16,  // CPU, bf16 weights, kTiledGemmMinRows rows or more: tiles + GEMM
  kMatRowsInt8,    // CPU, int8 weights, any number of rows: own kernels
  kMatRowsInt4,    // CPU, int4 weights, any number of rows: own kernels
  kDeviceInt8,     // CUDA, int8 weights: own GEMV up to 16 rows, else dequantized + GEMM
  kTorchInt4,      // LibTorch's int4 layout (GPU, or CPU for CI): _weight_int4pack_mm
};

// From this many rows of x, bf16 weights go through float32 tiles and GEMM
// (faster once the multiply, not the weight read, dominates; measured with
// kernels_bench, see bench/kernels/README.md).
inline constexpr int64_t kTiledGemmMinRows = 32;

// residual += Linear(x, weight, bias), in place, as one op where the path
// allows: addmm_ into the residual on the baseline path (the GPU's), the
// matrix-vector kernel writing into a scratch row and adding on the CPU. The
// residual must be contiguous and of x's dtype; otherwise Linear then add_.
// Used for the projections that end a block (o_proj, down_proj).
void LinearAddInto(torch::Tensor& residual, const torch::Tensor& x, const torch::Tensor& weight,
                   const torch::Tensor& bias = {}, const torch::Tensor& scale = {});

// Which path Linear(x, weight, bias) takes; for tests and benchmarks.
// Never throws.
LinearPath SelectLinearPath(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias = {}, const torch::Tensor& scale = {});

// A stable lower-case name for a path, e.g. "matvec_bf16".
const char* LinearPathName(LinearPath path);

}  // namespace medq::engine
