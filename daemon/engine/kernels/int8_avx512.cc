// The int8 products with AVX-512 VNNI (dense_kernels.h, MatVecI8Fn): a chunk
// of 64 weights is one register, its magnitudes (vpabsb) the unsigned side
// of one vpdpbusd an x row and its signs moved onto x by a masked subtract:
// the 16 lanes of the contract, the same integers as int8_rows.h's 256-bit
// product. Tiles of up to four x rows share the weight row (int8_rows.h's
// row loops). Built with -mavx2 -mfma -mavx512f -mavx512vl -mavx512bw
// -mavx512vnni, called only where cpu_features.cc found AVX-512 VNNI
// (dense_kernels_avx2.cc's table chooses).
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

template <int M, bool kStream>
inline void DotsI8(const int8_t* w, const I8Rows& x, int64_t i0, float* dots) {
  const int64_t in = x.in;
  const int64_t row_bytes = I8RowBytes(in), row_lanes = I8RowLaneScales(in);
  __m512 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm512_setzero_ps();
  const auto chunk = [&](int64_t k, __m512i v) {
    const __m512i magnitude = _mm512_abs_epi8(v);
    const __mmask64 negative = _mm512_movepi8_mask(v);
    for (int i = 0; i < M; ++i) {
      const __m512i xq = _mm512_loadu_si512(x.q + (i0 + i) * row_bytes + k);
      const __m512i signed_x = _mm512_mask_sub_epi8(xq, negative, _mm512_setzero_si512(), xq);
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), magnitude, signed_x);
      const __m512 scale = _mm512_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + k / 4);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[i]);
    }
  };
  int64_t k = 0;
  for (; k + 64 <= in; k += 64) {
    if constexpr (kStream) PrefetchAt<_MM_HINT_T1>(w + k, kStreamPrefetchBytes);
    chunk(k, _mm512_loadu_si512(w + k));
  }
  if (k < in) chunk(k, _mm512_maskz_loadu_epi8(~0ULL >> (64 - (in - k)), w + k));
  for (int i = 0; i < M; ++i) {
    const __m256 low = _mm512_castps512_ps256(acc[i]);
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1));
    dots[i] = HorizontalSum(_mm256_add_ps(low, high));
  }
}

struct DotsI8Zmm {
  template <int M, bool kStream>
  static void Run(const int8_t* w, const I8Rows& x, int64_t i0, float* dots) {
    DotsI8<M, kStream>(w, x, i0, dots);
  }
};

}  // namespace

void MatVecI8Vnni(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
                  int64_t row_begin, int64_t row_end) {
  MatVecI8Rows<DotsI8Zmm>(w, scale, x, bias, y, row_begin, row_end);
}

void MatRowsI8Vnni(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                   const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI8Tiles<DotsI8Zmm>(w, scale, x, out, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
