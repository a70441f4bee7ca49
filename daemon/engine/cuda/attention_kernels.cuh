// The decode step's attention kernels (internal), apart from the launchers
// in decode_kernels.cu so that they also compile as plain C++: they use only
// what device_common.cuh gives (Load, Store, WarpSum, RowPointer,
// DynamicShared) and CUDA's built-ins, which tests/kernels/cuda_emulation.h
// gives on the CPU, where attention_emulation_test.cc runs them, one thread a
// CUDA thread, against a double-precision reference: CI runs these kernels
// without a GPU. Include device_common.cuh (or the emulation) first.
#pragma once

#include <cmath>
#include <cstdint>

#include "daemon/engine/cuda/row_tables.h"

namespace medq::engine::cuda {
namespace {

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
