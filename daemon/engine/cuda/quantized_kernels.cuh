// The int8 CUDA kernels (internal), apart from their launchers in
// quantized_kernels.cu so that they also compile as plain C++, as
// decode_kernels.cuh's do: tests/kernels/decode_kernels_emulation_test.cc
// runs them on the CPU through cuda_emulation.h. Include device_common.cuh
// (or the emulation) first.
#pragma once

#include <cstdint>

namespace medq::engine::cuda {
namespace {

// The 16 int8 weights of one 16-byte load, as float32 (exact).
__device__ __forceinline__ void UnpackInt8(const uint4& v, float* out) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int b = 0; b < 4; ++b)
      out[4 * i + b] = static_cast<float>(static_cast<int8_t>((words[i] >> (8 * b)) & 0xffu));
  }
}

// Elements [16 v, 16 v + 16) of the row at x, as float32: 64 bytes of
// float32 or 32 of bf16/fp16, in 16-byte loads (x on 16 bytes).
template <typename T>
__device__ __forceinline__ void LoadSixteen(const T* x, int64_t v, float* out) {
  constexpr int kPerLoad = 16 / sizeof(T);
  const uint4* p = reinterpret_cast<const uint4*>(x) + v * (16 / kPerLoad);
#pragma unroll
  for (int l = 0; l < 16 / kPerLoad; ++l) {
    const uint4 raw = __ldg(p + l);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kPerLoad; ++i)
      out[l * kPerLoad + i] = Load(e, i);
  }
}

constexpr int kWarps = 8;   // rows a block
constexpr int kUnroll = 4;  // weight loads a lane has in flight

// Warp `warp` of block b takes output row b * kWarps + warp: lane l sums the
// 16-weight vectors l, l + 32, ... of that row against each of the m rows
// of x, then the warp adds its lanes and lane 0 writes.
template <typename T, int kM>
__global__ void GemvInt8Kernel(const T* __restrict__ x, const int8_t* __restrict__ w,
                               const float* __restrict__ scale, const T* bias, const T* residual,
                               T* y, int64_t n, int64_t k, int m_rows) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (row >= n) return;  // whole warps leave: no barrier below
  float acc[kM];
#pragma unroll
  for (int m = 0; m < kM; ++m)
    acc[m] = 0.0f;
  const int64_t vectors = k / 16;
  const uint4* wr = reinterpret_cast<const uint4*>(w + row * k);
  for (int64_t v0 = lane; v0 < vectors; v0 += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + 32 * u;
      wv[u] = v < vectors ? __ldg(wr + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = v0 + 32 * u;
      if (v >= vectors) break;
      float wf[16];
      UnpackInt8(wv[u], wf);
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        if (m >= m_rows) break;
        float xf[16];
        LoadSixteen(x + m * k, v, xf);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; ++i)
          sum = fmaf(wf[i], xf[i], sum);
        acc[m] += sum;
      }
    }
  }
  const float s = scale[row];
  const float b = bias != nullptr ? Load(bias, row) : 0.0f;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    const float total = WarpSum(acc[m]);
    if (lane != 0 || m >= m_rows) continue;
    float value = total * s + b;
    if (residual != nullptr) value += Load(residual, m * n + row);
    Store(y, m * n + row, value);
  }
}

template <typename T>
__global__ void DequantizeInt8Kernel(const int8_t* w, const float* scale, T* dst, int64_t n,
                                     int64_t k) {
  const int64_t total = n * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Store(dst, i, static_cast<float>(w[i]) * scale[i / k]);
  }
}

}  // namespace
}  // namespace medq::engine::cuda
