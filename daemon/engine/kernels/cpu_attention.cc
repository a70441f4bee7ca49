#include "daemon/engine/kernels/cpu_attention.h"

#include <algorithm>
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
  // Each cached key is a row of a [n, head_dim] matrix: q · kᵀ is a
  // matrix-vector product.
  ActiveKernels().matvec_f32(keys, d, a.q + h * d, nullptr, scores.data(), 0, n);
  const float scale = static_cast<float>(std::sqrt(static_cast<double>(d)));
  float max = -INFINITY;
  for (float& s : scores) {
    s /= scale;
    max = std::max(max, s);
  }
  float sum = 0.0f;
  for (float& s : scores) {
    s = std::exp(s - max);
    sum += s;
  }
  // Σ p_s · v_s over the cached values, rows of another [n, head_dim] matrix:
  // a vector-matrix product, accumulated in registers by the SIMD tables.
  for (float& s : scores)
    s /= sum;
  ActiveKernels().vecmat_f32(scores.data(), values, n, d, a.out + h * d);
}

}  // namespace

void CpuCachedAttention(std::span<const CachedAttention> rows) {
  int64_t bytes = 0, pieces = 0;
  for (const CachedAttention& a : rows) {
    bytes += 2 * a.kv_heads * (a.end - a.begin) * a.head_dim * static_cast<int64_t>(sizeof(float));
    pieces += a.heads;
  }
  // A row's heads are consecutive pieces: piece p is head p - first of the
  // row whose heads start at first.
  const auto run = [rows](int64_t piece) {
    thread_local std::vector<float> scores;
    for (const CachedAttention& a : rows) {
      if (piece < a.heads) return OneHead(a, piece, scores);
      piece -= a.heads;
    }
  };
  if (bytes < kMinBytesToShare) {
    for (int64_t p = 0; p < pieces; ++p)
      run(p);
    return;
  }
  ShareWork(pieces, KernelThreads() - 1, run);
}

}  // namespace medq::engine::kernels
