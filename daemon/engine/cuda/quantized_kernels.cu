#include "daemon/engine/cuda/quantized_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "daemon/engine/cuda/device_common.cuh"
// After device_common.cuh, whose helpers it uses.
#include "daemon/engine/cuda/quantized_kernels.cuh"

namespace medq::engine::cuda {
namespace {

template <int kM>
cudaError_t LaunchGemvInt8(const void* x, const int8_t* w, const float* scale, const void* bias,
                           const void* residual, void* y, int64_t m, int64_t n, int64_t k,
                           ElementType type, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((n + kWarps - 1) / kWarps);
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GemvInt8Kernel<T, kM><<<blocks, 32 * kWarps, 0, stream>>>(
        static_cast<const T*>(x), w, scale, static_cast<const T*>(bias),
        static_cast<const T*>(residual), static_cast<T*>(y), n, k, static_cast<int>(m));
  });
}

}  // namespace

bool GemvInt8Applies(const void* x, const void* w, int64_t m, int64_t k, ElementType type) {
  (void)type;  // 16 elements of any type are a whole number of 16-byte loads
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return m >= 1 && m <= 16 && k > 0 && k % 16 == 0 && aligned(x) && aligned(w);
}

cudaError_t GemvInt8(const void* x, const int8_t* w, const float* scale, const void* bias,
                     const void* residual, void* y, int64_t m, int64_t n, int64_t k,
                     ElementType type, cudaStream_t stream) {
  if (!GemvInt8Applies(x, w, m, k, type) || n <= 0) return cudaErrorInvalidValue;
  // The smallest of 1, 2, 4, 8 and 16 that holds m (decode_graph.h's buckets).
  if (m <= 1) return LaunchGemvInt8<1>(x, w, scale, bias, residual, y, m, n, k, type, stream);
  if (m <= 2) return LaunchGemvInt8<2>(x, w, scale, bias, residual, y, m, n, k, type, stream);
  if (m <= 4) return LaunchGemvInt8<4>(x, w, scale, bias, residual, y, m, n, k, type, stream);
  if (m <= 8) return LaunchGemvInt8<8>(x, w, scale, bias, residual, y, m, n, k, type, stream);
  return LaunchGemvInt8<16>(x, w, scale, bias, residual, y, m, n, k, type, stream);
}

cudaError_t DequantizeInt8(const int8_t* w, const float* scale, void* dst, int64_t n, int64_t k,
                           ElementType type, cudaStream_t stream) {
  const int64_t total = n * k;
  if (total == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t wanted = (total + threads - 1) / threads;
  const auto blocks = static_cast<unsigned>(wanted < 8192 ? wanted : 8192);
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DequantizeInt8Kernel<T><<<blocks, threads, 0, stream>>>(w, scale, static_cast<T*>(dst), n, k);
  });
}

}  // namespace medq::engine::cuda
