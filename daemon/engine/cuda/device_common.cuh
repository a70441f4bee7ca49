// Device helpers the medq_cuda_kernels files share (internal; included by
// .cu files only): float32 loads and stores of each element type, a warp's
// sum, a row table's pointer, the dynamic shared memory, and the launch of
// a kernel templated on the element type. tests/kernels/cuda_emulation.h
// defines the same names for its CPU run of decode_kernels.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "daemon/engine/cuda/decode_kernels.h"

namespace medq::engine::cuda {
namespace {

template <typename T>
__device__ __forceinline__ float Load(const T* p, int64_t i);
template <>
__device__ __forceinline__ float Load<float>(const float* p, int64_t i) {
  return p[i];
}
template <>
__device__ __forceinline__ float Load<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float Load<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}

template <typename T>
__device__ __forceinline__ void Store(T* p, int64_t i, float v);
template <>
__device__ __forceinline__ void Store<float>(float* p, int64_t i, float v) {
  p[i] = v;
}
template <>
__device__ __forceinline__ void Store<__nv_bfloat16>(__nv_bfloat16* p, int64_t i, float v) {
  p[i] = __float2bfloat16(v);
}
template <>
__device__ __forceinline__ void Store<__half>(__half* p, int64_t i, float v) {
  p[i] = __float2half(v);
}

// Where row `row`'s entry of a RowTables table points, as a T*.
template <typename T>
__device__ __forceinline__ T* RowPointer(const uint64_t* table, int row) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(table[row]));
}

// The block's dynamic shared memory (the launch's third parameter), as floats.
__device__ __forceinline__ float* DynamicShared() {
  extern __shared__ float dynamic_shared[];
  return dynamic_shared;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename F>
cudaError_t Dispatch(ElementType type, F&& launch) {
  switch (type) {
    case ElementType::kFloat:
      launch(static_cast<float*>(nullptr));
      break;
    case ElementType::kBFloat16:
      launch(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case ElementType::kHalf:
      launch(static_cast<__half*>(nullptr));
      break;
  }
  return cudaGetLastError();
}

}  // namespace
}  // namespace medq::engine::cuda
