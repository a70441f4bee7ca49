// The decode step's CUDA kernels (internal), apart from their launchers in
// decode_kernels.cu so that they also compile as plain C++: they use only
// what device_common.cuh gives (Load, Store, WarpSum, RowPointer,
// DynamicShared) and CUDA's built-ins, which tests/kernels/cuda_emulation.h
// gives on the CPU, where decode_kernels_emulation_test.cc runs them, one
// thread a CUDA thread, against double-precision references: CI runs these
// kernels without a GPU (in float32; the GPU test covers bf16 and fp16).
// Include device_common.cuh (or the emulation) first.
#pragma once

#include <cmath>
#include <cstdint>

#include "daemon/engine/cuda/decode_types.h"

namespace medq::engine::cuda {
namespace {

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float BlockSum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? partial[threadIdx.x] : 0.0f;
  if (warp == 0) v = WarpSum(v);
  if (threadIdx.x == 0) partial[0] = v;
  __syncthreads();
  const float total = partial[0];
  __syncthreads();  // partial is reused by the next call
  return total;
}

// Block (b, r) handles head b of row r: q heads, then k heads, then v heads.
// Thread t handles the pair (t, t + D/2); threads past D/2 only help reduce.
template <typename T>
__global__ void RopeCacheWriteKernel(const T* qkv, RowTables at, const T* q_norm, const T* k_norm,
                                     float eps, T* q_out, int heads, int kv_heads, int d) {
  const int head = blockIdx.x, row = blockIdx.y;
  const int half = d / 2;
  const int t = threadIdx.x;
  const int64_t p = at.positions[row];
  const int64_t capacity = at.capacities[row];
  const bool is_q = head < heads;
  const bool is_k = !is_q && head < heads + kv_heads;
  const T* x = qkv + (static_cast<int64_t>(row) * (heads + 2 * kv_heads) + head) * d;
  if (!is_q && !is_k) {  // a v head: copied as it is
    const int g = head - heads - kv_heads;
    T* dst = RowPointer<T>(at.values, row) + (static_cast<int64_t>(g) * capacity + p) * d;
    for (int i = t; i < d; i += blockDim.x)
      dst[i] = x[i];
    return;
  }
  const bool active = t < half;
  float a = active ? Load(x, t) : 0.0f;
  float b = active ? Load(x, t + half) : 0.0f;
  const T* norm = is_q ? q_norm : k_norm;
  if (norm != nullptr) {
    // transformers' RMSNorm over the head: float32, then the weight.
    const float squares = BlockSum(a * a + b * b);
    const float r = rsqrtf(squares / static_cast<float>(d) + eps);
    if (active) {
      a = a * r * Load(norm, t);
      b = b * r * Load(norm, t + half);
    }
  }
  if (!active) return;
  const T* cos = RowPointer<const T>(at.cos, row);
  const T* sin = RowPointer<const T>(at.sin, row);
  const float c0 = Load(cos, p * d + t), c1 = Load(cos, p * d + t + half);
  const float s0 = Load(sin, p * d + t), s1 = Load(sin, p * d + t + half);
  const float lo = a * c0 - b * s0;
  const float hi = b * c1 + a * s1;
  T* dst =
      is_q ? q_out + (static_cast<int64_t>(row) * heads + head) * d
           : RowPointer<T>(at.keys, row) + (static_cast<int64_t>(head - heads) * capacity + p) * d;
  Store(dst, t, lo);
  Store(dst, t + half, hi);
}

template <typename T>
__global__ void SiluMulKernel(const T* gate_up, T* out, int64_t rows, int64_t inter) {
  const int64_t n = rows * inter;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / inter, j = k % inter;
    const float gate = Load(gate_up, r * 2 * inter + j);
    const float up = Load(gate_up, r * 2 * inter + inter + j);
    Store(out, k, gate / (1.0f + __expf(-gate)) * up);
  }
}

// Eight float32 values from one 16-byte load of T.
template <typename T>
struct Vector;
template <>
struct Vector<float> {
  static constexpr int kSize = 4;
  __device__ __forceinline__ static void Unpack(const uint4& v, float* out) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
};
#ifdef __CUDACC__  // the CPU emulation has float elements only
template <>
struct Vector<__nv_bfloat16> {
  static constexpr int kSize = 8;
  __device__ __forceinline__ static void Unpack(const uint4& v, float* out) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
  }
};
template <>
struct Vector<__half> {
  static constexpr int kSize = 8;
  __device__ __forceinline__ static void Unpack(const uint4& v, float* out) {
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[i]));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
};
#endif

constexpr int kGemvWarps = 8;
constexpr int kGemvUnroll = 4;  // weight loads a lane has in flight at once

// `split` warps of a block share output row r (block b holds rows b * 8 /
// split onwards), each summing every split-th 32-vector stretch of the
// row, for the `m` rows of x (at most kM): lane l reads 16-byte vectors of
// w's row r, kGemvUnroll at a time before using them, and the same vectors
// of each x row (small and read by every warp: from cache). Splitting a
// row over warps and loading ahead keep enough bytes in flight when the
// matrix has few rows (o_proj, down_proj: a few hundred warps otherwise,
// each waiting on one load at a time). kIn says what multiplies w
// (GemvInput): x; x normed, its sum of squares gathered in the same pass and
// applied at the end (the norm is a scale of the row); or silu(gate) · up
// from x = [gate | up].
template <typename T, int kM, GemvInput kIn>
__global__ void GemvKernel(const T* __restrict__ x, const T* __restrict__ w, const T* bias,
                           const T* residual, T* y, int64_t n, int64_t k, int m_rows,
                           const T* __restrict__ norm, float eps, int split) {
  using V = Vector<T>;
  __shared__ float partial[kGemvWarps][2 * kM];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kGemvWarps / split) + warp / split;
  const int part = warp % split;
  const bool valid = row < n;  // no early return: the block meets at a barrier below
  const int64_t x_stride = kIn == GemvInput::kSiluMul ? 2 * k : k;
  float acc[kM], squares[kM];
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    acc[m] = 0.0f;
    squares[m] = 0.0f;
  }
  const int64_t vectors = valid ? k / V::kSize : 0;
  const uint4* wr = reinterpret_cast<const uint4*>(w + (valid ? row : 0) * k);
  const int64_t stride = 32 * static_cast<int64_t>(split);
  for (int64_t v0 = part * 32 + lane; v0 < vectors; v0 += stride * kGemvUnroll) {
    uint4 wv[kGemvUnroll];
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int64_t v = v0 + u * stride;
      wv[u] = v < vectors ? __ldg(wr + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kGemvUnroll; ++u) {
      const int64_t v = v0 + u * stride;
      if (v >= vectors) break;
      float wf[V::kSize];
      V::Unpack(wv[u], wf);
      if constexpr (kIn == GemvInput::kRmsNorm) {
        float g[V::kSize];
        V::Unpack(__ldg(reinterpret_cast<const uint4*>(norm) + v), g);
#pragma unroll
        for (int i = 0; i < V::kSize; ++i)
          wf[i] *= g[i];
      }
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        if (m >= m_rows) break;
        float xf[V::kSize];
        V::Unpack(__ldg(reinterpret_cast<const uint4*>(x + m * x_stride) + v), xf);
        if constexpr (kIn == GemvInput::kSiluMul) {
          float up[V::kSize];
          V::Unpack(__ldg(reinterpret_cast<const uint4*>(x + m * x_stride + k) + v), up);
#pragma unroll
          for (int i = 0; i < V::kSize; ++i)
            xf[i] = __fdividef(xf[i], 1.0f + __expf(-xf[i])) * up[i];
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < V::kSize; ++i) {
          sum = fmaf(wf[i], xf[i], sum);
          if constexpr (kIn == GemvInput::kRmsNorm) squares[m] = fmaf(xf[i], xf[i], squares[m]);
        }
        acc[m] += sum;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    acc[m] = WarpSum(acc[m]);
    if constexpr (kIn == GemvInput::kRmsNorm) squares[m] = WarpSum(squares[m]);
  }
  if (split > 1) {  // the row's parts meet in shared memory
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        partial[warp][m] = acc[m];
        partial[warp][kM + m] = squares[m];
      }
    }
    __syncthreads();
    if (part != 0) return;
    for (int p = 1; p < split; ++p) {
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        acc[m] += partial[warp + p][m];
        squares[m] += partial[warp + p][kM + m];
      }
    }
  }
  if (lane != 0 || !valid) return;
  const float b = bias != nullptr ? Load(bias, row) : 0.0f;
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    if (m >= m_rows) break;
    float value = acc[m];
    if constexpr (kIn == GemvInput::kRmsNorm) {
      value *= rsqrtf(squares[m] / static_cast<float>(k) + eps);
    }
    value += b;
    if (residual != nullptr) value += Load(residual, m * n + row);
    Store(y, m * n + row, value);
  }
}

constexpr int kAttentionWarps = 8;
constexpr int kMaxSlice = 32;  // D / 32 elements a lane: D <= 1024
// The fewest keys a split walks (4 a warp, one round of loads for heads of
// up to 64 elements): below that the blocks' setup and the merge cost more
// than the parallelism gains.
constexpr int64_t kMinSplitKeys = 32;

// Block (h, r, s) handles query head h of row r, over split s of the keys
// (one split, the whole range, when gridDim.z is 1). Warp w walks positions
// lo + w, lo + w + 8, ... up to hi; within a warp each lane holds a slice of
// D (elements lane, lane + 32, ...), the dot product is a warp sum, and each
// warp keeps an online softmax (its max, its sum and its slice of the
// weighted values). The warps are merged at the end through shared memory.
// kPartial false: the block has every key and writes the normalized result
// to out. kPartial true (flash-decoding): the keys are cut into gridDim.z
// chunks of at least kMinSplitKeys, and the block writes its chunk's
// unnormalized sums, max and sum of weights to `partials` (float32,
// [rows, heads, splits, D + 2]) for MergeSplitsKernel; a chunk past the
// last key writes max -inf and sums 0.
// kSlice: elements of D a lane holds (D <= 32 * kSlice), a constant so that
// the lane's slices stay in registers.
template <typename T, int kSlice, bool kPartial>
__global__ void DecodeAttentionKernel(const T* q, RowTables at, T* out, float* partials, int heads,
                                      int kv_heads, int d, int64_t window) {
  float* shared = DynamicShared();  // [warps][d + 2]
  const int head = blockIdx.x, row = blockIdx.y;
  const int g = head / (heads / kv_heads);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t p = at.positions[row];
  const int64_t capacity = at.capacities[row];
  q += static_cast<int64_t>(row) * heads * d;
  out += static_cast<int64_t>(row) * heads * d;
  const T* keys = RowPointer<const T>(at.keys, row);
  const T* values = RowPointer<const T>(at.values, row);
  const int64_t begin = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
  int64_t lo = begin, hi = p;  // the block's keys, both ends included
  if constexpr (kPartial) {
    const int64_t splits = gridDim.z;
    int64_t chunk = (p - begin + splits) / splits;  // ceil(keys / splits)
    if (chunk < kMinSplitKeys) chunk = kMinSplitKeys;
    lo = begin + static_cast<int64_t>(blockIdx.z) * chunk;
    hi = lo + chunk - 1 < p ? lo + chunk - 1 : p;
  }
  const float scale = rsqrtf(static_cast<float>(d));
  float qs[kSlice], acc[kSlice];
#pragma unroll
  for (int j = 0; j < kSlice; ++j) {
    const int i = lane + 32 * j;
    qs[j] = i < d ? Load(q, static_cast<int64_t>(head) * d + i) * scale : 0.0f;
    acc[j] = 0.0f;
  }
  const T* k_head = keys + static_cast<int64_t>(g) * capacity * d;
  const T* v_head = values + static_cast<int64_t>(g) * capacity * d;
  float m = -INFINITY, l = 0.0f;
  if constexpr (kPartial) {
    // One step of the online softmax: key score `dot`, value slice `v`.
    const auto take = [&](float dot, const float* v) {
      const float m_new = fmaxf(m, dot);
      const float correction = __expf(m - m_new);
      const float w = __expf(dot - m_new);
      l = l * correction + w;
#pragma unroll
      for (int j = 0; j < kSlice; ++j)
        acc[j] = acc[j] * correction + w * v[j];
      m = m_new;
    };
    // kKeys keys a warp at a time, every load issued before the first sum:
    // a walk over the cache is bound by load latency (a few blocks a head
    // on a device of a hundred SMs), not by bandwidth. Warp w takes keys
    // lo + w * kKeys onwards, then 8 * kKeys further on, and so on.
    constexpr int kKeys = kSlice <= 2 ? 4 : kSlice <= 4 ? 2 : 1;
    for (int64_t s0 = lo + static_cast<int64_t>(warp) * kKeys; s0 <= hi;
         s0 += static_cast<int64_t>(kAttentionWarps) * kKeys) {
      float ks[kKeys][kSlice], vs[kKeys][kSlice], dots[kKeys];
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
#pragma unroll
        for (int j = 0; j < kSlice; ++j) {
          const int i = lane + 32 * j;
          const bool in = s0 + u <= hi && i < d;
          ks[u][j] = in ? Load(k_head, (s0 + u) * d + i) : 0.0f;
          vs[u][j] = in ? Load(v_head, (s0 + u) * d + i) : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        dots[u] = 0.0f;
#pragma unroll
        for (int j = 0; j < kSlice; ++j)
          dots[u] += qs[j] * ks[u][j];
        dots[u] = WarpSum(dots[u]);
      }
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        if (s0 + u <= hi) take(dots[u], vs[u]);
      }
    }
  } else {
    for (int64_t s = lo + warp; s <= hi; s += kAttentionWarps) {
      float dot = 0.0f;
#pragma unroll
      for (int j = 0; j < kSlice; ++j) {
        const int i = lane + 32 * j;
        if (i < d) dot += qs[j] * Load(k_head, s * d + i);
      }
      dot = WarpSum(dot);
      const float m_new = fmaxf(m, dot);
      const float correction = __expf(m - m_new);
      const float w = __expf(dot - m_new);
      l = l * correction + w;
#pragma unroll
      for (int j = 0; j < kSlice; ++j) {
        const int i = lane + 32 * j;
        acc[j] = acc[j] * correction + (i < d ? w * Load(v_head, s * d + i) : 0.0f);
      }
      m = m_new;
    }
  }
  float* mine = shared + warp * (d + 2);
#pragma unroll
  for (int j = 0; j < kSlice; ++j) {
    const int i = lane + 32 * j;
    if (i < d) mine[i] = acc[j];
  }
  if (lane == 0) {
    mine[d] = m;
    mine[d + 1] = l;
  }
  __syncthreads();
  float m_all = -INFINITY;
  for (int w = 0; w < kAttentionWarps; ++w)
    m_all = fmaxf(m_all, shared[w * (d + 2) + d]);
  float l_all = 0.0f;
  for (int w = 0; w < kAttentionWarps; ++w) {
    const float mw = shared[w * (d + 2) + d];
    if (mw != -INFINITY) l_all += shared[w * (d + 2) + d + 1] * __expf(mw - m_all);
  }
  float* partial = nullptr;
  if constexpr (kPartial) {
    partial =
        partials + ((static_cast<int64_t>(row) * heads + head) * gridDim.z + blockIdx.z) * (d + 2);
    if (threadIdx.x == 0) {
      partial[d] = m_all;
      partial[d + 1] = l_all;
    }
  }
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
      const float mw = shared[w * (d + 2) + d];
      if (mw != -INFINITY) sum += shared[w * (d + 2) + i] * __expf(mw - m_all);
    }
    if constexpr (kPartial) {
      partial[i] = sum;
    } else {
      Store(out, static_cast<int64_t>(head) * d + i, sum / l_all);
    }
  }
}

// Block (h, r) merges the splits of query head h of row r that
// DecodeAttentionKernel<..., true> wrote: each split's sums scaled by
// exp(its max - the largest max), over the scaled sums of weights. Split 0
// always holds a key, so the largest max is finite.
template <typename T>
__global__ void MergeSplitsKernel(const float* partials, T* out, int heads, int d, int splits) {
  const int head = blockIdx.x, row = blockIdx.y;
  const int64_t stride = d + 2;
  const float* base = partials + (static_cast<int64_t>(row) * heads + head) * splits * stride;
  float m_all = -INFINITY;
  for (int s = 0; s < splits; ++s)
    m_all = fmaxf(m_all, base[s * stride + d]);
  float l_all = 0.0f;
  for (int s = 0; s < splits; ++s) {
    const float ms = base[s * stride + d];
    if (ms != -INFINITY) l_all += base[s * stride + d + 1] * __expf(ms - m_all);
  }
  out += (static_cast<int64_t>(row) * heads + head) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float ms = base[s * stride + d];
      if (ms != -INFINITY) sum += base[s * stride + i] * __expf(ms - m_all);
    }
    Store(out, i, sum / l_all);
  }
}

}  // namespace
}  // namespace medq::engine::cuda
