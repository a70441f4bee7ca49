#include "daemon/engine/cuda/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "daemon/engine/cuda/device_common.cuh"
// After device_common.cuh, whose helpers it uses.
#include "daemon/engine/cuda/attention_kernels.cuh"

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

}  // namespace

cudaError_t RopeCacheWrite(const void* qkv, const RowTables& rows_at, const void* q_norm,
                           const void* k_norm, float eps, void* q_out, int rows, int heads,
                           int kv_heads, int head_dim, ElementType type, cudaStream_t stream) {
  if (head_dim % 2 != 0 || head_dim > 1024 || rows < 1 || rows > 65535) {
    return cudaErrorInvalidValue;
  }
  const int threads = ((head_dim / 2 + 31) / 32) * 32;
  const dim3 grid(static_cast<unsigned>(heads + 2 * kv_heads), static_cast<unsigned>(rows));
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    RopeCacheWriteKernel<T><<<grid, threads, 0, stream>>>(
        static_cast<const T*>(qkv), rows_at, static_cast<const T*>(q_norm),
        static_cast<const T*>(k_norm), eps, static_cast<T*>(q_out), heads, kv_heads, head_dim);
  });
}

int64_t DecodeAttentionWorkspace(int rows, int heads, int head_dim, int splits) {
  return splits > 1 ? static_cast<int64_t>(rows) * heads * splits * (head_dim + 2) : 0;
}

int DecodeAttentionSplits(int rows, int heads, int multiprocessors) {
  if (rows < 1 || heads < 1 || multiprocessors < 1) return 1;
  int splits = 1;
  while (splits < kMaxAttentionSplits &&
         static_cast<int64_t>(rows) * heads * splits < 2 * static_cast<int64_t>(multiprocessors))
    splits *= 2;
  return splits;
}

cudaError_t DecodeAttention(const void* q, const RowTables& rows_at, void* out, int rows, int heads,
                            int kv_heads, int head_dim, int64_t window, ElementType type,
                            cudaStream_t stream, int splits, float* workspace) {
  if (head_dim > 32 * kMaxSlice || kv_heads <= 0 || heads % kv_heads != 0 || rows < 1 ||
      rows > 65535 || splits < 1 || splits > kMaxAttentionSplits ||
      (splits > 1 && workspace == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const size_t shared = sizeof(float) * kAttentionWarps * (head_dim + 2);
  const int slice = (head_dim + 31) / 32;
  const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(rows),
                  static_cast<unsigned>(splits));
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto launch = [&](auto kernel) {
      kernel<<<grid, 32 * kAttentionWarps, shared, stream>>>(static_cast<const T*>(q), rows_at,
                                                             static_cast<T*>(out), workspace, heads,
                                                             kv_heads, head_dim, window);
    };
    const auto launch_slices = [&](auto partial) {
      constexpr bool kPartial = decltype(partial)::value;
      if (slice <= 1) {
        launch(DecodeAttentionKernel<T, 1, kPartial>);
      } else if (slice <= 2) {
        launch(DecodeAttentionKernel<T, 2, kPartial>);
      } else if (slice <= 4) {
        launch(DecodeAttentionKernel<T, 4, kPartial>);
      } else if (slice <= 8) {
        launch(DecodeAttentionKernel<T, 8, kPartial>);
      } else {
        launch(DecodeAttentionKernel<T, kMaxSlice, kPartial>);
      }
    };
    if (splits == 1) {
      launch_slices(std::false_type{});
      return;
    }
    launch_slices(std::true_type{});
    const int threads = head_dim < 1024 ? ((head_dim + 31) / 32) * 32 : 1024;
    MergeSplitsKernel<T>
        <<<dim3(static_cast<unsigned>(heads), static_cast<unsigned>(rows)), threads, 0, stream>>>(
            workspace, static_cast<T*>(out), heads, head_dim, splits);
  });
}

bool GemvApplies(const void* x, const void* w, int64_t m, int64_t k, ElementType type) {
  const int64_t bytes = type == ElementType::kFloat ? 4 : 2;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return m >= 1 && m <= 16 && k > 0 && (k * bytes) % 16 == 0 && aligned(x) && aligned(w);
}

namespace {

// Warps a weight row is split over (1, 2, 4 or 8): doubled while the
// matrix has too few rows to give a device some 8192 warps (132 SMs of 64
// on an H100) and each part keeps two vectors a lane. MEDQ_GEMV_SPLIT=N in
// the environment fixes it (a benchmark's comparison).
int SplitFor(int64_t n, int64_t k, ElementType type) {
  static const int fixed = [] {
    const char* v = std::getenv("MEDQ_GEMV_SPLIT");
    const int s = v == nullptr ? 0 : std::atoi(v);
    return s == 1 || s == 2 || s == 4 || s == 8 ? s : 0;
  }();
  if (fixed != 0) return fixed;
  const int64_t vectors = k / (type == ElementType::kFloat ? 4 : 8);
  int split = 1;
  while (split < 8 && n * split < 8192 && vectors >= 64 * split)
    split *= 2;
  return split;
}

// The GEMV of at most kM rows with input kIn, for every element type.
template <int kM, GemvInput kIn>
cudaError_t LaunchGemv(const void* x, const void* w, const void* bias, const void* residual,
                       void* y, int64_t m, int64_t n, int64_t k, ElementType type,
                       cudaStream_t stream, const void* norm, float eps) {
  const int split = SplitFor(n, k, type);
  const int64_t rows_per_block = kGemvWarps / split;
  const auto blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    GemvKernel<T, kM, kIn><<<blocks, 32 * kGemvWarps, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
        static_cast<const T*>(residual), static_cast<T*>(y), n, k, static_cast<int>(m),
        static_cast<const T*>(norm), eps, split);
  });
}

template <GemvInput kIn>
cudaError_t GemvRows(const void* x, const void* w, const void* bias, const void* residual, void* y,
                     int64_t m, int64_t n, int64_t k, ElementType type, cudaStream_t stream,
                     const void* norm, float eps) {
  // The smallest of 1, 2, 4, 8 and 16 that holds m: a decode step's rows
  // come in those buckets (decode_graph.h).
  if (m <= 1) return LaunchGemv<1, kIn>(x, w, bias, residual, y, m, n, k, type, stream, norm, eps);
  if (m <= 2) return LaunchGemv<2, kIn>(x, w, bias, residual, y, m, n, k, type, stream, norm, eps);
  if (m <= 4) return LaunchGemv<4, kIn>(x, w, bias, residual, y, m, n, k, type, stream, norm, eps);
  if (m <= 8) return LaunchGemv<8, kIn>(x, w, bias, residual, y, m, n, k, type, stream, norm, eps);
  return LaunchGemv<16, kIn>(x, w, bias, residual, y, m, n, k, type, stream, norm, eps);
}

}  // namespace

cudaError_t Gemv(const void* x, const void* w, const void* bias, const void* residual, void* y,
                 int64_t m, int64_t n, int64_t k, ElementType type, cudaStream_t stream,
                 GemvInput input, const void* norm, float eps) {
  if (!GemvApplies(x, w, m, k, type) || n <= 0) return cudaErrorInvalidValue;
  switch (input) {
    case GemvInput::kPlain:
      return GemvRows<GemvInput::kPlain>(x, w, bias, residual, y, m, n, k, type, stream, nullptr,
                                         0.0f);
    case GemvInput::kRmsNorm:
      if (norm == nullptr || reinterpret_cast<uintptr_t>(norm) % 16 != 0) {
        return cudaErrorInvalidValue;
      }
      return GemvRows<GemvInput::kRmsNorm>(x, w, bias, residual, y, m, n, k, type, stream, norm,
                                           eps);
    case GemvInput::kSiluMul:
      return GemvRows<GemvInput::kSiluMul>(x, w, bias, residual, y, m, n, k, type, stream, nullptr,
                                           0.0f);
  }
  return cudaErrorInvalidValue;
}

cudaError_t SiluMul(const void* gate_up, void* out, int64_t rows, int64_t inter, ElementType type,
                    cudaStream_t stream) {
  const int64_t n = rows * inter;
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int blocks =
      static_cast<int>((n + threads - 1) / threads < 4096 ? (n + threads - 1) / threads : 4096);
  return Dispatch(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    SiluMulKernel<T><<<blocks, threads, 0, stream>>>(static_cast<const T*>(gate_up),
                                                     static_cast<T*>(out), rows, inter);
  });
}

}  // namespace medq::engine::cuda
