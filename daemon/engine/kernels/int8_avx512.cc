// The int8 products with AVX-512 VNNI (dense_kernels.h, MatVecI8Fn): a chunk
// of 64 weights is one register, offset by 128 (one vpxor) the unsigned side
// of one vpdpbusd an x row; each lane's sum starts from -128 · Σ x of its
// block (PrepareI8Rows' offset) and takes a span's eight chunks before one
// convert and one FMA: the 16 lanes of the contract, the same integers as
// int8_rows.h's 256-bit product. Tiles of up to four x rows share the weight row (int8_rows.h's
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
  const int64_t row_bytes = I8RowBytes(in), row_lanes = I8RowLanes(in);
  const __m512i offset_128 = _mm512_set1_epi8(-128);
  __m512 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm512_setzero_ps();
  for (int64_t span = 0; span * kInt8Span < in; ++span) {
    const int64_t k0 = span * kInt8Span;
    __m512i p[M];
    for (int i = 0; i < M; ++i)
      p[i] = _mm512_loadu_si512(x.offset + (i0 + i) * row_lanes + span * 16);
    const auto chunk = [&](int64_t k, __m512i v) {
      const __m512i u = _mm512_xor_si512(v, offset_128);
      for (int i = 0; i < M; ++i)
        p[i] = _mm512_dpbusd_epi32(p[i], u, _mm512_loadu_si512(x.q + (i0 + i) * row_bytes + k));
    };
    if constexpr (kStream) {  // every chunk's line asked for ahead, the last span's too
      for (int64_t k = k0; k < k0 + kInt8Span && k < in; k += kInt8Chunk)
        PrefetchAt<_MM_HINT_T1>(w + k, kStreamPrefetchBytes);
    }
    if (k0 + kInt8Span <= in) {
      for (int c = 0; c < 8; ++c)
        chunk(k0 + c * kInt8Chunk, _mm512_loadu_si512(w + k0 + c * kInt8Chunk));
    } else {  // the last span: whole chunks, then zeros after the last weight
      int64_t k = k0;
      for (; k + kInt8Chunk <= in; k += kInt8Chunk)
        chunk(k, _mm512_loadu_si512(w + k));
      if (k < in) chunk(k, _mm512_maskz_loadu_epi8(~0ULL >> (64 - (in - k)), w + k));
    }
    for (int i = 0; i < M; ++i) {
      const __m512 d = _mm512_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + span * 16);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[i]), d, acc[i]);
    }
  }
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
