#include "daemon/engine/cuda/decode_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "daemon/engine/cuda/device_common.cuh"
#include "daemon/engine/tuning.h"
// After device_common.cuh, whose helpers it uses.
#include "daemon/engine/cuda/decode_kernels.cuh"

namespace medq::engine::cuda {

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
    const char* v = tuning::Value(tuning::kGemvSplit);
    return v == nullptr ? 0 : tuning::ParseGemvSplit(v).value_or(0);
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
