// The int8 products' building blocks (dense_kernels.h, MatVecI8Fn) as
// templates with internal linkage, for int8_avx2.cc, int8_avxvnni.cc and
// int8_avx512.cc, the only includers (all built with -mavx2 -mfma; the
// second with AVX-VNNI too, the third with AVX-512 and its VNNI).
// DotsI8Ymm is the 256-bit product: the 16 lanes of the contract as two
// registers, lanes [0, 8) and [8, 16), 32 weights (one block of x) at a
// time. vpmaddubsw and vpdpbusd multiply unsigned bytes by signed ones, so
// a weight's sign moves onto x (vpsignb) and its magnitude, up to 128, is
// the unsigned side: the same products, exact. The integer sums come from a
// policy: AVX2's vpmaddubsw + vpmaddwd (at most 2 · 128 · 127 a pair, no
// saturation) or AVX-VNNI's vpdpbusd, the same integers. The row loops take
// any such product (and int8_avx512.cc's 512-bit one): tiles of up to four x
// rows share each weight row, which the first tile reads from memory and
// the later ones find in L1.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// Eight int8 weights at w as float32 (DequantizeI8Avx2).
inline __m256 WidenI8(const int8_t* w) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
}

// y = fma(dot, scale, bias), or dot · scale: spelled out so that the compiler
// neither fuses nor splits it differently from the scalar table.
inline float ScaleI8(float dot, const float* scale, const float* bias, int64_t r) {
  if (bias == nullptr) return _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(dot), _mm_set_ss(scale[r])));
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dot), _mm_set_ss(scale[r]), _mm_set_ss(bias[r])));
}

// M x rows (from row i0 of x) against the weight row w: each row's lanes
// [0, 8) and [8, 16). IntDot::Sum(u, s): the eight 32-bit sums of four
// products of unsigned bytes u and signed bytes s.
template <typename IntDot, int M, bool kStream>
inline void DotsI8Ymm(const int8_t* w, const I8Rows& x, int64_t i0, float* dots) {
  const int64_t in = x.in;
  const int64_t row_bytes = I8RowBytes(in), row_lanes = I8RowLaneScales(in);
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const auto half = [&](int64_t k, __m256i v, int h) {
    const __m256i magnitude = _mm256_sign_epi8(v, v);
    for (int i = 0; i < M; ++i) {
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + (i0 + i) * row_bytes + k));
      const __m256i p = IntDot::Sum(magnitude, _mm256_sign_epi8(xq, v));
      const __m256 scale = _mm256_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + k / 4);
      acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[i][h]);
    }
  };
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kStream) {
      if ((k & 32) == 0) PrefetchAt<_MM_HINT_T1>(w + k, kStreamPrefetchBytes);
    }
    half(k, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k)),
         static_cast<int>((k / 32) % 2));
  }
  if (k < in) {  // the last weights, zeros after them (x is zero there too)
    alignas(32) int8_t tail[32] = {};
    std::memcpy(tail, w + k, static_cast<size_t>(in - k));
    half(k, _mm256_load_si256(reinterpret_cast<const __m256i*>(tail)),
         static_cast<int>((k / 32) % 2));
  }
  for (int i = 0; i < M; ++i)
    dots[i] = HorizontalSum(_mm256_add_ps(acc[i][0], acc[i][1]));
}

template <typename IntDot>
struct DotsI8YmmRows {
  template <int M, bool kStream>
  static void Run(const int8_t* w, const I8Rows& x, int64_t i0, float* dots) {
    DotsI8Ymm<IntDot, M, kStream>(w, x, i0, dots);
  }
};

// matvec_i8 with Dots.
template <typename Dots>
void MatVecI8Rows(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
                  int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    Dots::template Run<1, true>(w + r * x.in, x, 0, &dot);
    y[r] = ScaleI8(dot, scale, bias, r);
  }
}

// matrows_i8 with Dots: tiles of four x rows, then two and one.
template <typename Dots>
void MatRowsI8Tiles(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int8_t* wr = w + r * x.in;
    ForRowTiles(m, [&]<int T>(int64_t i) {
      float dots[4];
      if (i == 0) {
        Dots::template Run<T, true>(wr, x, i, dots);
      } else {
        Dots::template Run<T, false>(wr, x, i, dots);
      }
      for (int j = 0; j < T; ++j)
        y[(i + j) * out + r] = ScaleI8(dots[j], scale, bias, r);
    });
  }
}

}  // namespace
}  // namespace medq::engine::kernels
