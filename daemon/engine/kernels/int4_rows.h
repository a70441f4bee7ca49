// The int4 products' building blocks (dense_kernels.h, MatVecI4Fn) as
// templates with internal linkage, for int4_avx2.cc, int4_avxvnni.cc and
// int4_avx512.cc, the only includers (all built with -mavx2 -mfma; the
// second with AVX-VNNI too, the third with AVX-512 and its VNNI).
// DotsI4Ymm is the 256-bit product: the 16 lanes of the contract as two
// registers, lanes [0, 8) and [8, 16), a half chunk (two blocks, 64 weights)
// at a time; its integer sums come from a policy, AVX2's vpmaddubsw +
// vpmaddwd or AVX-VNNI's vpdpbusd, which give the same integers. The row
// loops take any such product (and int4_avx512.cc's 512-bit one): tiles of
// up to four x rows share each unpacked weight row, which the first tile
// reads from memory and the later ones find in L1.
#pragma once

#include <immintrin.h>

#include <algorithm>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// dot + bias, spelled out so that the compiler cannot fuse it differently.
inline float AddBiasI4(float dot, const float* bias, int64_t r) {
  if (bias == nullptr) return dot;
  return _mm_cvtss_f32(_mm_add_ss(_mm_set_ss(dot), _mm_set_ss(bias[r])));
}

// The group's bf16 scale of block b as float32.
template <int64_t G>
inline float BlockScale(const uint16_t* params, int64_t b) {
  return Scalar(params[2 * (b * kInt4Block / G)]);
}

// M x rows (from row i0 of x) against one weight row: each row's lanes
// [0, 8) and [8, 16), half chunk by half chunk, each half unpacked once for
// the M rows. IntDot::Sum(lo, hi, xlo, xhi): the eight 32-bit sums of four
// byte products of lo · xlo plus four of hi · xhi (unsigned weights, signed
// x).
template <typename IntDot, int64_t G, int M, bool kStream>
inline void DotsI4Ymm(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                      float* dots) {
  const int64_t in = x.in, blocks = in / kInt4Block;
  const int64_t row_bytes = I4RowBytes(in), row_lanes = I4RowLaneScales(in);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t c = 0; c * 4 < blocks; ++c) {
    if constexpr (kStream) PrefetchAt<_MM_HINT_T1>(w + c * 64, kStreamPrefetchBytes);
    for (int h = 0; h < 2; ++h) {
      const int64_t b0 = 4 * c + 2 * h;
      if (b0 >= blocks) break;
      const bool two = b0 + 1 < blocks;
      const uint8_t* wb = w + b0 * (kInt4Block / 2);
      const __m256i v =
          two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb))
              : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb)));
      const __m256i lo = _mm256_and_si256(v, nibble);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
      const __m256 s =
          _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(BlockScale<G>(params, b0))),
                               _mm_set1_ps(two ? BlockScale<G>(params, b0 + 1) : 0.0f), 1);
      for (int i = 0; i < M; ++i) {
        const int8_t* q = x.q + (i0 + i) * row_bytes + c * kInt4Chunk + 32 * h;
        const __m256i p =
            IntDot::Sum(lo, hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64)));
        const __m256 scale =
            _mm256_mul_ps(s, _mm256_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16 + 8 * h));
        acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[i][h]);
      }
    }
  }
  // The minimums: A_{g % 16} += m_g · S_g, lanes [0, 8) then [8, 16).
  const int64_t groups = in / G, row_sums = I4RowGroupSums(in, G);
  const __m256i high_half = _mm256_set1_epi32(kBf16HighHalf);
  for (int64_t g0 = 0; g0 < groups; g0 += 8) {
    const int64_t n = std::min<int64_t>(8, groups - g0);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256 mins = _mm256_castsi256_ps(_mm256_and_si256(
        _mm256_maskload_epi32(reinterpret_cast<const int*>(params + 2 * g0), mask), high_half));
    const int h = static_cast<int>((g0 / 8) % 2);
    for (int i = 0; i < M; ++i) {
      const __m256 sums = _mm256_loadu_ps(x.group_sum + (i0 + i) * row_sums + g0);
      acc[i][h] = _mm256_fmadd_ps(mins, sums, acc[i][h]);
    }
  }
  for (int i = 0; i < M; ++i)
    dots[i] = HorizontalSum(_mm256_add_ps(acc[i][0], acc[i][1]));
}

// DotsI4Ymm as the Dots of the loops below.
template <typename IntDot>
struct DotsI4YmmRows {
  template <int64_t G, int M, bool kStream>
  static void Run(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                  float* dots) {
    DotsI4Ymm<IntDot, G, M, kStream>(w, params, x, i0, dots);
  }
};

// matvec_i4 with Dots (group is 32, 64 or 128, each its own instance).
template <typename Dots>
void MatVecI4Rows(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                  float* y, int64_t row_begin, int64_t row_end) {
  WithInt4Group(x.group, [&](auto g) {
    constexpr int64_t G = decltype(g)::value;
    const int64_t groups = x.in / G;
    for (int64_t r = row_begin; r < row_end; ++r) {
      float dot;
      Dots::template Run<G, 1, true>(w + r * (x.in / 2), params + r * 2 * groups, x, 0, &dot);
      y[r] = AddBiasI4(dot, bias, r);
    }
  });
}

// matrows_i4 with Dots: tiles of four x rows, then two and one.
template <typename Dots>
void MatRowsI4Tiles(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                    int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  WithInt4Group(x.group, [&](auto g) {
    constexpr int64_t G = decltype(g)::value;
    const int64_t groups = x.in / G;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* wr = w + r * (x.in / 2);
      const uint16_t* pr = params + r * 2 * groups;
      ForRowTiles(m, [&]<int T>(int64_t i) {
        float dots[4];
        if (i == 0) {
          Dots::template Run<G, T, true>(wr, pr, x, i, dots);
        } else {
          Dots::template Run<G, T, false>(wr, pr, x, i, dots);
        }
        for (int j = 0; j < T; ++j)
          y[(i + j) * out + r] = AddBiasI4(dots[j], bias, r);
      });
    }
  });
}

}  // namespace
}  // namespace medq::engine::kernels
