// The AVX2+FMA table's packed_bf16 kernel (dense_kernels.h), built with
// -mavx2 -mfma: bf16 weights in tiles of 16 rows (PackBf16Tiles), against up
// to four x rows a pass, one x value broadcast at a time.
//
// Why this layout: the row-major passes (dense_kernels_rows_avx2.cc) load a
// vector of x for every FMA, and on the 2-core Zen 3 VM those loads, not the
// FMA pipes, bound four x rows to about 30 G multiply-adds a second a core,
// half of what the pipes do; with the weights coming from memory the
// arithmetic and the reads then add up instead of overlapping (four rows
// cost 1.3 to 1.5 times one). Here a 32-byte load holds column k of 16
// weight rows, and each x value is broadcast once for both of its halves:
// 8 FMAs per five loads. A throwaway harness on that VM (two threads, the
// 3072 x 576 gate/up shape, 256 MB of copies rotated, seven runs, median):
// four x rows 142 to 155 µs a call against 193 to 220 for the row-major
// pass, one x row 154 to 166 against 160 to 195; from cache (one thread)
// 45 against 30 G multiply-adds a second.
#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

namespace medq::engine::kernels {
namespace {

// out[i][0:16] = column sums of the tile at t (in columns) against x row i
// of the M at x (row stride in). Lane j of `low` sums row j of the tile,
// lane j of `high` row 8 + j: each an FMA chain over k in order, from 0, the
// order of the scalar table's PackedBf16 (dense_kernels_scalar.cc). kStream:
// the tile comes from memory, so the weights kStreamPrefetchBytes on are
// asked for; a later pass finds the tile in cache.
template <int M, bool kStream>
inline void TilePass(const uint16_t* t, int64_t in, const float* x, float (*out)[kPackedTileRows]) {
  __m256 low[M], high[M];
  for (int i = 0; i < M; ++i) {
    low[i] = _mm256_setzero_ps();
    high[i] = _mm256_setzero_ps();
  }
  const __m256i mask = _mm256_set1_epi32(kBf16HighHalf);
  const auto column = [&](int64_t k) {
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t + k * kPackedTileRows));
    const __m256 w_low = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    const __m256 w_high = _mm256_castsi256_ps(_mm256_and_si256(raw, mask));
    for (int i = 0; i < M; ++i) {
      const __m256 xk = _mm256_broadcast_ss(x + i * in + k);
      low[i] = _mm256_fmadd_ps(w_low, xk, low[i]);
      high[i] = _mm256_fmadd_ps(w_high, xk, high[i]);
    }
  };
  int64_t k = 0;
  for (; k + 2 <= in; k += 2) {  // two columns: one 64-byte line
    if constexpr (kStream) {
      PrefetchAt<_MM_HINT_T1>(t + k * kPackedTileRows, kStreamPrefetchBytes);
    }
    column(k);
    column(k + 1);
  }
  if (k < in) column(k);
  for (int i = 0; i < M; ++i) {
    _mm256_storeu_ps(out[i], low[i]);
    _mm256_storeu_ps(out[i] + 8, high[i]);
  }
}

template <bool kStream>
inline void TilePassOf(int64_t n, const uint16_t* t, int64_t in, const float* x,
                       float (*out)[kPackedTileRows]) {
  switch (n) {
    case 1:
      return TilePass<1, kStream>(t, in, x, out);
    case 2:
      return TilePass<2, kStream>(t, in, x, out);
    case 3:
      return TilePass<3, kStream>(t, in, x, out);
    default:
      return TilePass<4, kStream>(t, in, x, out);
  }
}

}  // namespace

void PackedBf16Avx2(const uint16_t* packed, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t tile_begin, int64_t tile_end) {
  constexpr int64_t kPassRows = 4;
  float sums[kPassRows][kPackedTileRows];
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const uint16_t* t = packed + tile * in * kPackedTileRows;
    const int64_t first = tile * kPackedTileRows;
    const int64_t rows = out - first < kPackedTileRows ? out - first : kPackedTileRows;
    for (int64_t i = 0; i < m; i += kPassRows) {
      const int64_t n = m - i < kPassRows ? m - i : kPassRows;
      if (i == 0) {
        TilePassOf<true>(n, t, in, x, sums);
      } else {
        TilePassOf<false>(n, t, in, x + i * in, sums);
      }
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t j = 0; j < rows; ++j)
          Store(y, out, bias, i + s, first + j, sums[s][j]);
      }
    }
  }
}

}  // namespace medq::engine::kernels
