// The int8 products' building blocks (dense_kernels.h, MatVecI8Fn) as
// templates with internal linkage, for int8_avx2.cc, int8_avxvnni.cc and
// int8_avx512.cc, the only includers (all built with -mavx2 -mfma; the
// second with AVX-VNNI too, the third with AVX-512 and its VNNI).
// DotsI8Ymm is the 256-bit product: the 16 lanes of the contract as two
// registers, lanes [0, 8) and [8, 16), each summed over a span's eight
// chunks (32 bytes of each) in integers before one convert and one FMA.
// vpmaddubsw and vpdpbusd multiply unsigned bytes by signed ones; the
// integer sums come from a policy that gives the same integers: AVX2's
// moves a weight's sign onto x (vpsignb) and takes its magnitude, up to
// 128, as the unsigned side (vpmaddubsw + vpmaddwd, at most 2 · 128 · 127 a
// pair, no saturation); AVX-VNNI's reads the weights offset by 128 and
// starts from PrepareI8Rows' offset, -128 · Σ x (one vpdpbusd a row). The
// row loops take any such product (and int8_avx512.cc's 512-bit one): tiles
// of up to four x rows share each weight row, which the first tile reads
// from memory and the later ones find in L1.
#pragma once

#include <immintrin.h>

#include <algorithm>
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

// The n < 32 weight bytes at w, zeros after them (x is zero there too): a
// row's last half chunk, kept out of the loops (a call in them would spill
// their registers).
[[gnu::noinline]] inline __m256i LastWeightsI8(const int8_t* w, int64_t n) {
  alignas(32) int8_t tail[32] = {};
  std::memcpy(tail, w, static_cast<size_t>(n));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(tail));
}

// M x rows (from row i0 of x) against the weight row w: each row's lanes
// [0, 8) and [8, 16), a span at a time, half by half. IntDot: Weights(v),
// the 32 weight bytes v as its unsigned side; Start(offset), a lane sum's
// start from the prepared offsets; Add(p, u, v, xq), p plus the eight
// 32-bit sums of four products of weights v (u as Weights made them) and x
// bytes xq. The half is a template argument so that acc[i][h] names a
// register, and the whole chunks loop without a test for the row's end.
template <typename IntDot, int M, bool kStream>
inline void DotsI8Ymm(const int8_t* w, const I8Rows& x, int64_t i0, float* dots) {
  const int64_t in = x.in;
  const int64_t row_bytes = I8RowBytes(in), row_lanes = I8RowLanes(in);
  const int8_t* const xq = x.q + i0 * row_bytes;
  const float* const lane_scale = x.lane_scale + i0 * row_lanes;
  const int32_t* const offset = x.offset + i0 * row_lanes;
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  // Half h of the span from k0 (chunks of 64 bytes): bytes [32h, 32h + 32)
  // of each chunk.
  auto half = [&]<int h>(int64_t span, int64_t k0, int64_t chunks) {
    const int64_t left = in - k0 - 32 * h;  // bytes from the half's first
    if (left <= 0) return;
    const int64_t whole = std::min(chunks, left >= 32 ? (left - 32) / kInt8Chunk + 1 : 0);
    __m256i p[M];
    for (int i = 0; i < M; ++i)
      p[i] = IntDot::Start(offset + i * row_lanes + span * 16 + 8 * h);
    auto add = [&](int64_t k, __m256i v) {
      const __m256i u = IntDot::Weights(v);
      for (int i = 0; i < M; ++i) {
        const auto* at = reinterpret_cast<const __m256i*>(xq + i * row_bytes + k);
        p[i] = IntDot::Add(p[i], u, v, _mm256_loadu_si256(at));
      }
    };
    for (int64_t c = 0; c < whole; ++c) {
      const int64_t k = k0 + c * kInt8Chunk + 32 * h;
      add(k, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k)));
    }
    if (whole < chunks && left > whole * kInt8Chunk) {
      const int64_t k = k0 + whole * kInt8Chunk + 32 * h;
      add(k, LastWeightsI8(w + k, in - k));
    }
    for (int i = 0; i < M; ++i) {
      const __m256 d = _mm256_loadu_ps(lane_scale + i * row_lanes + span * 16 + 8 * h);
      acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i]), d, acc[i][h]);
    }
  };
  for (int64_t span = 0; span * kInt8Span < in; ++span) {
    const int64_t k0 = span * kInt8Span;
    const int64_t chunks = std::min<int64_t>(8, (in - k0 + kInt8Chunk - 1) / kInt8Chunk);
    if constexpr (kStream) {
      for (int64_t c = 0; c < chunks; ++c)
        PrefetchAt<_MM_HINT_T1>(w + k0 + c * kInt8Chunk, kStreamPrefetchBytes);
    }
    half.template operator()<0>(span, k0, chunks);
    half.template operator()<1>(span, k0, chunks);
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
