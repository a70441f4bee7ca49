// CUDA kernels for weights quantized to int8 (quantize.h in the engine:
// symmetric, one float32 scale per output row), for the decode step's
// projections on a GPU (issue 44). Plain pointers and a stream, like
// decode_kernels.h; kernels/device_linear.cc is the LibTorch-facing side.
// int4 weights on a GPU need no kernel of medq's own: LibTorch 2.x's
// _weight_int4pack_mm (tinygemm) reads them (device_linear.cc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "daemon/engine/cuda/decode_kernels.h"

namespace medq::engine::cuda {

// y [m, n] = x [m, k] · (w · diag(scale))ᵀ + bias [n] (when given) +
// residual [m, n] (when given; y may be residual itself), for w int8 [n, k]
// row-major and scale float32 [n]: each row's dot product summed in float32
// (one fma a weight), then times its scale, once. m from 1 to 16: one warp
// reads a weight row once for every row of x, in 16-byte loads. k a multiple
// of 16, x and w on 16 bytes (GemvInt8Applies). x, bias, residual and y are
// of `type`.
bool GemvInt8Applies(const void* x, const void* w, int64_t m, int64_t k, ElementType type);
cudaError_t GemvInt8(const void* x, const int8_t* w, const float* scale, const void* bias,
                     const void* residual, void* y, int64_t m, int64_t n, int64_t k,
                     ElementType type, cudaStream_t stream);

// dst [n, k] (of `type`) = float(w[r, c]) · scale[r], rounded once to type:
// the int8 matrix dequantized, for a prefill's GEMM.
cudaError_t DequantizeInt8(const int8_t* w, const float* scale, void* dst, int64_t n, int64_t k,
                           ElementType type, cudaStream_t stream);

}  // namespace medq::engine::cuda
