// The AVX-512VL table's int8 kernels: matvec_i8 and matrows_i8 with 512-bit
// registers. dense_kernels.h's four 8-wide accumulators a, b, c, d of a
// block of 32 weights are held as two 16-wide ones, [a | b] and [c | d], so
// a block takes two widenings (16 int8 weights to float32 each) and two FMAs
// where int8_rows.h's 8-wide kernels take four of each; lane for lane the
// same products in the same order, so the same bits. After the blocks the
// halves are taken apart and the rest (the 8-wide groups into a, the fold,
// the scalar tail) is int8_rows.h's. A tile of four x rows holds eight
// accumulators. Built with -mavx2 -mfma -mavx512f -mavx512vl, called only
// where cpu_features.cc found AVX-512VL.
#include "daemon/engine/kernels/int8_rows.h"

// GCC 12 reports the undefined pass-through operand inside the 512-bit
// intrinsics as uninitialized once they are inlined (GCC bug 105593); that
// operand is never read. As in dense_kernels_rows_avx512.cc, the warnings
// are off for this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace medq::engine::kernels {
namespace {

// Sixteen int8 weights at w as float32 (exact).
inline __m512 WidenI8x16(const int8_t* w) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(raw));
}

inline __m256 LowHalf(__m512 v) {
  return _mm512_castps512_ps256(v);
}
inline __m256 HighHalf(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// dots[i] = DotI8(w, x row i) for the M x rows at x (row stride in), as
// int8_rows.h's DotsI8 computes it. Stream: the first pass over a row (from
// memory) prefetches ahead into L2; the later ones find the row in L1.
template <int M, bool kStream>
inline void DotsI8x16(const int8_t* w, int64_t in, const float* x, float* dots) {
  __m512 ab[M], cd[M];
  for (int i = 0; i < M; ++i) {
    ab[i] = _mm512_setzero_ps();
    cd[i] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    // One prefetch a 64-byte line (two blocks of int8).
    if constexpr (kStream) {
      if ((k & 32) == 0) PrefetchAt<_MM_HINT_T1>(w + k, kStreamPrefetchBytes);
    }
    const __m512 w01 = WidenI8x16(w + k);
    const __m512 w23 = WidenI8x16(w + k + 16);
    for (int i = 0; i < M; ++i) {
      const float* xi = x + i * in + k;
      ab[i] = _mm512_fmadd_ps(w01, _mm512_loadu_ps(xi), ab[i]);
      cd[i] = _mm512_fmadd_ps(w23, _mm512_loadu_ps(xi + 16), cd[i]);
    }
  }
  __m256 a[M], b[M], c[M], d[M];
  for (int i = 0; i < M; ++i) {
    a[i] = LowHalf(ab[i]);
    b[i] = HighHalf(ab[i]);
    c[i] = LowHalf(cd[i]);
    d[i] = HighHalf(cd[i]);
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

struct DotsI8x16Rows {
  template <int M, bool kStream>
  static void Run(const int8_t* w, int64_t in, const float* x, float* dots) {
    DotsI8x16<M, kStream>(w, in, x, dots);
  }
};

}  // namespace

void MatVecI8Avx512(const int8_t* w, const float* scale, int64_t in, const float* x,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatVecI8Rows<DotsI8x16Rows>(w, scale, in, x, bias, y, row_begin, row_end);
}

void MatRowsI8Avx512(const int8_t* w, const float* scale, int64_t in, int64_t out, const float* x,
                     int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  // Tiles of four x rows: eight 16-wide accumulators.
  MatRowsI8Tiles<4, DotsI8x16Rows>(w, scale, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
