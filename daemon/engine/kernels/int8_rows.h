// The int8 kernels' building blocks (dense_kernels.h, MatVecI8Fn) as
// templates with internal linkage, for int8_avx2.cc and int8_avx512.cc, the
// only includers (both built with -mavx2 -mfma; the second with AVX-512VL
// too, which takes WidenI8, ScaleI8, the tail and the row loops from here
// and holds the accumulators 16 wide itself).
// Each weight row is widened eight at a time (sign extension to 32 bits, then
// to float32, both exact) and multiplied into four accumulators per x row, in
// the order the scalar table's DotI8 spells out, so the results are its bits
// whatever the tile. A tile of several x rows shares each widened weight
// vector: the widening, not the FMA, is the costly part of a product.
#pragma once

#include <immintrin.h>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// Eight int8 weights at w as float32.
inline __m256 WidenI8(const int8_t* w) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
}

// dots[i] = DotI8(w, x row i) for the M x rows at x (row stride in).
// Stream: the first pass over a row (from memory) prefetches ahead into L2;
// the later ones find the row in L1.
template <int M, bool kStream>
inline void DotsI8(const int8_t* w, int64_t in, const float* x, float* dots) {
  __m256 a[M], b[M], c[M], d[M];
  for (int i = 0; i < M; ++i) {
    a[i] = _mm256_setzero_ps();
    b[i] = _mm256_setzero_ps();
    c[i] = _mm256_setzero_ps();
    d[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    // One prefetch a 64-byte line (two blocks of int8).
    if constexpr (kStream) {
      if ((k & 32) == 0) PrefetchAt<_MM_HINT_T1>(w + k, kStreamPrefetchBytes);
    }
    const __m256 w0 = WidenI8(w + k);
    const __m256 w1 = WidenI8(w + k + 8);
    const __m256 w2 = WidenI8(w + k + 16);
    const __m256 w3 = WidenI8(w + k + 24);
    for (int i = 0; i < M; ++i) {
      const float* xi = x + i * in + k;
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xi), a[i]);
      b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xi + 8), b[i]);
      c[i] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xi + 16), c[i]);
      d[i] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xi + 24), d[i]);
    }
  }
  for (; k + 8 <= in; k += 8) {
    const __m256 w0 = WidenI8(w + k);
    for (int i = 0; i < M; ++i)
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), a[i]);
  }
  for (int i = 0; i < M; ++i) {
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[i], b[i]), _mm256_add_ps(c[i], d[i]));
    dots[i] = AddTail(HorizontalSum(sum), w, x + i * in, k, in);
  }
}

// y = fma(dot, scale, bias), or dot · scale: spelled out so that the compiler
// neither fuses nor splits it differently from the scalar table.
inline float ScaleI8(float dot, const float* scale, const float* bias, int64_t r) {
  if (bias == nullptr) return _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(dot), _mm_set_ss(scale[r])));
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dot), _mm_set_ss(scale[r]), _mm_set_ss(bias[r])));
}

// DotsI8 as the Dots of the loops below (int8_avx512.cc has a 16-wide one).
struct DotsI8x8 {
  template <int M, bool kStream>
  static void Run(const int8_t* w, int64_t in, const float* x, float* dots) {
    DotsI8<M, kStream>(w, in, x, dots);
  }
};

// Rows [row_begin, row_end) of w against one x row: matvec_i8.
template <typename Dots>
inline void MatVecI8Rows(const int8_t* w, const float* scale, int64_t in, const float* x,
                         const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    Dots::template Run<1, true>(w + r * in, in, x, &dot);
    y[r] = ScaleI8(dot, scale, bias, r);
  }
}

// Rows [row_begin, row_end) of w against the m x rows, kMaxTile x rows at a
// time (kMaxTile 4, 2 or 1), then the rest in tiles of two and one.
template <int kMaxTile, typename Dots = DotsI8x8>
inline void MatRowsI8Tiles(const int8_t* w, const float* scale, int64_t in, int64_t out,
                           const float* x, int64_t m, const float* bias, float* y,
                           int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int8_t* wr = w + r * in;
    float dots[4];
    int64_t i = 0;
    const auto tile = [&]<int M>() {
      if (i == 0) {
        Dots::template Run<M, true>(wr, in, x, dots);
      } else {
        Dots::template Run<M, false>(wr, in, x + i * in, dots);
      }
      for (int j = 0; j < M; ++j)
        y[(i + j) * out + r] = ScaleI8(dots[j], scale, bias, r);
      i += M;
    };
    if constexpr (kMaxTile >= 4) {
      while (i + 4 <= m)
        tile.template operator()<4>();
    }
    while (i + 2 <= m)
      tile.template operator()<2>();
    if (i < m) tile.template operator()<1>();
  }
}

}  // namespace
}  // namespace medq::engine::kernels
