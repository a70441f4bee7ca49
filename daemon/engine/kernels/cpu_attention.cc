#include "daemon/engine/kernels/cpu_attention.h"

#include <cmath>
#include <vector>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/work_sharing.h"

namespace medq::engine::kernels {
namespace {

// Below this many bytes of keys and values read, the heads run on the
// calling thread: waking a helper costs more than it saves.
constexpr int64_t kMinBytesToShare = 64 * 1024;

void OneHead(const CachedAttention& a, int64_t h, std::vector<float>& scores) {
  const int64_t d = a.head_dim, n = a.end - a.begin;
  const int64_t g = h / (a.heads / a.kv_heads);
  const float* keys = a.keys + (g * a.capacity + a.begin) * d;
  const float* values = a.values + (g * a.capacity + a.begin) * d;
  scores.resize(static_cast<size_t>(n));
  const DenseKernels& k = ActiveKernels();
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  k.scores_f32(keys, n, d, a.q + h * d, scale, scores.data());
  k.softmax_f32(scores.data(), n);
  // Σ p_s · v_s over the cached values, rows of another [n, head_dim] matrix:
  // a vector-matrix product, accumulated in registers by the SIMD tables.
  k.vecmat_f32(scores.data(), values, n, d, a.out + h * d);
}

}  // namespace

void CpuCachedAttention(std::span<const CachedAttention> rows) {
  int64_t bytes = 0, groups = 0, heads = 0;
  for (const CachedAttention& a : rows) {
    bytes += 2 * a.kv_heads * (a.end - a.begin) * a.head_dim * static_cast<int64_t>(sizeof(float));
    groups += a.kv_heads;
    heads += a.heads;
  }
  // A piece of work is a kv group (one kv head of one row, with the query
  // heads that read it, one after another on one thread) where there are
  // enough groups to share evenly: the group's keys and values then come
  // from memory once, and its other heads find them in the core's cache
  // (four SmolLM-135M sequences' attention 15% faster at 64 positions and
  // 19% at 512, kernels_bench --only attention). Otherwise (one SmolLM-135M
  // sequence: 3 groups for 2 threads) a piece is one query head, for
  // balance. Below kMinBytesToShare the pieces run in order on this thread.
  const int threads = KernelThreads();
  const bool by_group = groups >= 2 * threads || groups % threads == 0;
  // A row's pieces are consecutive: piece p is piece p - first of the row
  // whose pieces start at first.
  const auto run = [rows, by_group](int64_t piece) {
    thread_local std::vector<float> scores;
    for (const CachedAttention& a : rows) {
      const int64_t in_row = by_group ? a.kv_heads : a.heads;
      if (piece >= in_row) {
        piece -= in_row;
        continue;
      }
      const int64_t per_piece = by_group ? a.heads / a.kv_heads : 1;
      for (int64_t h = piece * per_piece; h < (piece + 1) * per_piece; ++h)
        OneHead(a, h, scores);
      return;
    }
  };
  const int64_t pieces = by_group ? groups : heads;
  if (bytes < kMinBytesToShare) {
    for (int64_t p = 0; p < pieces; ++p)
      run(p);
    return;
  }
  ShareWork(pieces, threads - 1, run);
}

}  // namespace medq::engine::kernels
