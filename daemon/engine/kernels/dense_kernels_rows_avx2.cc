// The AVX2+FMA matrows kernels (dense_kernels.h): several x rows against each
// weight row, every result bitwise the one-row kernel's (Dot1, SplitDotBf16
// in dense_kernels_avx2.cc), built with -mavx2 -mfma like that file.
//
// Why tiles: the one-row kernels load one x vector per weight vector (two
// loads per FMA), so running them m times costs m times the loads, and with
// weights streamed from memory once, those loads from L1 become the limit
// (measured: 8 rows cost ~8 times one). A tile of R weight rows x M x rows
// keeps R * M sums in registers and loads each vector once for all of them.
//
// Why the same bits: a one-row kernel keeps four independent accumulators,
// a, b, c, d, each summing its own fixed subset of the products in k order
// (f32: the 8-wide groups at offsets 0, 8, 16, 24 of every 32 elements, plus
// the remaining 8-wide groups into a; bf16: the even and odd elements of the
// first 16 of every 32 into a and b, of the second 16 into c and d, plus a
// remaining 16 into a and b), then returns HorizontalSum((a + b) + (c + d))
// plus the scalar tail. A tile computes the same accumulators, each with the
// same FMAs in the same order, only in separate passes over the rows (one or
// two accumulators per pass, so that the R * M sums fit in registers).
#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// f32, R weight rows x M x rows, one accumulator class per pass (offset 8 *
// cls of every 32): R * M accumulators, R weight loads and M x loads for
// R * M FMAs per step. dots[r * M + i] = Dot1(w[r], x[i]).
template <int R, int M>
inline void TileF32(const float* w, const float* x, int64_t in, float* dots) {
  __m256 part[4][R][M];
  int64_t k = 0;
  for (int cls = 0; cls < 4; ++cls) {
    const int64_t off = 8 * cls;
    __m256 acc[R][M];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < M; ++i)
        acc[r][i] = _mm256_setzero_ps();
    for (k = 0; k + 32 <= in; k += 32) {
      for (int r = 0; r < R; ++r) {
        const __m256 wv = _mm256_loadu_ps(w + r * in + k + off);
        for (int i = 0; i < M; ++i)
          acc[r][i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * in + k + off), acc[r][i]);
      }
    }
    if (cls == 0) {
      for (; k + 8 <= in; k += 8) {
        for (int r = 0; r < R; ++r) {
          const __m256 wv = _mm256_loadu_ps(w + r * in + k);
          for (int i = 0; i < M; ++i)
            acc[r][i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i * in + k), acc[r][i]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < M; ++i)
        part[cls][r][i] = acc[r][i];
  }
  // k: where the scalar tail starts (after the 8-wide groups of class 0).
  k = in / 32 * 32 + (in % 32) / 8 * 8;
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      const __m256 sum = _mm256_add_ps(_mm256_add_ps(part[0][r][i], part[1][r][i]),
                                       _mm256_add_ps(part[2][r][i], part[3][r][i]));
      dots[r * M + i] = AddTail(HorizontalSum(sum), w + r * in, x + i * in, k, in);
    }
  }
}

// bf16 (x rows laid out by PrepareBf16X), R weight rows x M x rows, one half
// of every 32 per pass: one load of 16 weights gives the even (a or c) and
// odd (b or d) accumulators' operands. dots[r * M + i] = SplitDotBf16.
template <int R, int M>
inline void TileBf16(const uint16_t* w, const float* x, int64_t in, float* dots) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m256 halves[2][R][M];  // (a + b), (c + d)
  int64_t k = 0;
  for (int h = 0; h < 2; ++h) {
    const int64_t off = 16 * h;
    __m256 even[R][M], odd[R][M];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < M; ++i) {
        even[r][i] = _mm256_setzero_ps();
        odd[r][i] = _mm256_setzero_ps();
      }
    }
    const auto step = [&](int64_t at) {
      for (int r = 0; r < R; ++r) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * in + at));
        const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
        const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(raw, high));
        for (int i = 0; i < M; ++i) {
          even[r][i] = _mm256_fmadd_ps(we, _mm256_loadu_ps(x + i * in + at), even[r][i]);
          odd[r][i] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(x + i * in + at + 8), odd[r][i]);
        }
      }
    };
    for (k = 0; k + 32 <= in; k += 32)
      step(k + off);
    if (h == 0 && k + 16 <= in) {
      step(k);
      k += 16;
    }
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < M; ++i)
        halves[h][r][i] = _mm256_add_ps(even[r][i], odd[r][i]);
  }
  k = in / 32 * 32 + (in % 32) / 16 * 16;
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      const __m256 sum = _mm256_add_ps(halves[0][r][i], halves[1][r][i]);
      dots[r * M + i] = AddTail(HorizontalSum(sum), w + r * in, x + i * in, k, in);
    }
  }
}

// Runs Tile<R, M> over rows [r0, r0 + R) and every x row, M at a time with
// the last 1 .. M - 1 rows as smaller tiles; writes y[i * out + r] with bias.
template <typename T, int R, int M, typename Tile1, typename Tile2, typename Tile3, typename TileM>
inline void RowBlock(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t r0, TileM tile_m, Tile1 tile_1,
                     Tile2 tile_2, Tile3 tile_3) {
  float dots[R * M];
  const auto store = [&](int64_t i0, int rows_x) {
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < rows_x; ++i) {
        const float d = dots[r * rows_x + i];
        y[(i0 + i) * out + r0 + r] = bias != nullptr ? d + bias[r0 + r] : d;
      }
    }
  };
  const T* wr = w + r0 * in;
  int64_t i = 0;
  for (; i + M <= m; i += M) {
    tile_m(wr, x + i * in, in, dots);
    store(i, M);
  }
  const int64_t left = m - i;
  if (left == 1) tile_1(wr, x + i * in, in, dots);
  if (left == 2) tile_2(wr, x + i * in, in, dots);
  if (left == 3) tile_3(wr, x + i * in, in, dots);
  if (left > 0) store(i, static_cast<int>(left));
}

}  // namespace

void MatRowsF32Avx2(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  // 2 weight rows x 4 x rows: 8 accumulators, 6 loads per 8 FMAs.
  int64_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) {
    RowBlock<float, 2, 4>(w, in, out, x, m, bias, y, r, TileF32<2, 4>, TileF32<2, 1>, TileF32<2, 2>,
                          TileF32<2, 3>);
  }
  if (r < row_end) {
    RowBlock<float, 1, 4>(w, in, out, x, m, bias, y, r, TileF32<1, 4>, TileF32<1, 1>, TileF32<1, 2>,
                          TileF32<1, 3>);
  }
}

void MatRowsBf16Avx2(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  // 2 weight rows x 2 x rows: 8 accumulators, 6 loads per 8 FMAs.
  int64_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) {
    RowBlock<uint16_t, 2, 2>(w, in, out, x, m, bias, y, r, TileBf16<2, 2>, TileBf16<2, 1>,
                             TileBf16<2, 1>, TileBf16<2, 1>);
  }
  if (r < row_end) {
    RowBlock<uint16_t, 1, 2>(w, in, out, x, m, bias, y, r, TileBf16<1, 2>, TileBf16<1, 1>,
                             TileBf16<1, 1>, TileBf16<1, 1>);
  }
}

}  // namespace medq::engine::kernels
