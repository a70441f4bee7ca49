// The int4 products' building blocks (dense_kernels.h, MatVecI4Fn) as
// templates with internal linkage, for int4_avx2.cc, int4_avxvnni.cc and
// int4_avx512.cc, the only includers (all built with -mavx2 -mfma; the
// second with AVX-VNNI too, the third with AVX-512 and its VNNI).
// DotsI4Ymm is the 256-bit product: the 16 lanes of the contract as two
// registers, lanes [0, 8) and [8, 16), a half span (eight blocks, 256
// weights) at a time; its integer sums come from a policy, AVX2's vpmaddubsw
// + vpmaddwd or AVX-VNNI's vpdpbusd, which give the same integers. The row
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

// Block l of a span belongs to the span's group l >> kGroupShift<G>.
template <int64_t G>
inline constexpr int kGroupShift = G == 32   ? 0
                                   : G == 64 ? 1
                                             : 2;

// Lane l of a half span is its block l, whose group is pair l >>
// kGroupShift<G> of the half span's parameters.
template <int64_t G>
inline __m256i PairIndexYmm() {
  return _mm256_srli_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), kGroupShift<G>);
}

// The first n (<= 8) 32-bit words at p as a mask for maskload.
inline __m256i FirstWords(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// A plain span (n < 8 blocks at ws, the parameters of its groups at p):
// half chunks of two blocks, lanes 4i + t of [0, 8) for blocks 4h and 4h +
// 1 of chunk h, of [8, 16) for blocks 4h + 2 and 4h + 3, each block's
// scale and d permuted in from the span's (IntDot as InterleavedHalfYmm's
// below). kLow, kHigh: whether lanes [0, 8) and [8, 16) are wanted.
template <typename IntDot, int64_t G, int M, bool kLow, bool kHigh>
[[gnu::always_inline]] inline void PlainSpanYmm(const uint8_t* ws, const uint16_t* p,
                                                const I4Rows& x, int64_t i0, int64_t c, int64_t n,
                                                __m256 (*acc)[2]) {
  const int64_t row_bytes = I4RowBytes(x.in), row_lanes = I4RowLaneScales(x.in);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i raw =
      _mm256_maskload_epi32(reinterpret_cast<const int*>(p), FirstWords(n * kInt4Block / G));
  // Half chunk `half` of chunk h, a template argument so that acc[i][half]
  // names a register.
  auto half_chunk = [&]<int half>(int64_t h) {
    const int64_t b0 = 4 * h + 2 * half, nb = std::min<int64_t>(2, n - b0);
    if (nb <= 0) return;
    const __m256i v =
        _mm256_maskload_epi32(reinterpret_cast<const int*>(ws + 16 * b0), FirstWords(4 * nb));
    const __m256i lo = _mm256_and_si256(v, nibble);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    const __m256i block = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(b0)),
                                           _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    const __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_permutevar8x32_epi32(raw, _mm256_srli_epi32(block, kGroupShift<G>)), 16));
    for (int i = 0; i < M; ++i) {
      const int8_t* q = x.q + (i0 + i) * row_bytes + c * kInt4SpanBytes + 128 * h + 32 * half;
      const __m256i sum =
          IntDot::Finish(IntDot::template Quarter<false>(_mm256_setzero_si256(), lo, hi, q));
      const __m256 d = _mm256_permutevar8x32_ps(
          _mm256_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16), block);
      acc[i][half] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(s, d), acc[i][half]);
    }
  };
  for (int64_t h = 0; 4 * h < n; ++h) {
    if constexpr (kLow) half_chunk.template operator()<0>(h);
    if constexpr (kHigh) half_chunk.template operator()<1>(h);
  }
}

// Half h (lanes [8h, 8h + 8)) of the interleaved span c (n >= 8 blocks at
// ws, the parameters of its groups from p) for M x rows (from row i0),
// added to acc[i][h]: its four quarters unpacked once for the M rows.
// kWhole: the half holds all eight blocks (n = 16, or h = 0), so its loads
// need no mask. Quarter by quarter, each row's partial sums take the
// quarter's products (IntDot::Quarter<kInOrder>(part, lo, hi, q): part plus
// four byte products of lo · x at q plus four of hi · x at q + 64 per lane,
// unsigned weights, signed x; IntDot::Finish(part): the eight 32-bit sums).
// With several rows the sums stay in quarter order (kInOrder), so that one
// quarter's nibbles and a partial sum a row are all that is live; one row
// alone lets the compiler add its products as a tree.
template <typename IntDot, int64_t G, int M, int h, bool kWhole>
[[gnu::always_inline]] inline void InterleavedHalfYmm(const uint8_t* ws, int64_t n,
                                                      const uint16_t* p, const I4Rows& x,
                                                      int64_t i0, int64_t c, __m256 (*acc)[2]) {
  constexpr int64_t kPairsPerHalf = 8 * kInt4Block / G;
  const int64_t row_bytes = I4RowBytes(x.in), row_lanes = I4RowLaneScales(x.in);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const int64_t nh = kWhole ? 8 : n - 8 * h;
  const __m256i words = FirstWords(nh);
  const int8_t* q = x.q + i0 * row_bytes + c * kInt4SpanBytes + 32 * h;
  __m256i part[M];
  for (int i = 0; i < M; ++i)
    part[i] = _mm256_setzero_si256();
  for (int t = 0; t < 4; ++t) {
    const auto* at = reinterpret_cast<const __m256i*>(ws + Int4WordAt(n, 8 * h, t));
    const __m256i v = kWhole ? _mm256_loadu_si256(at)
                             : _mm256_maskload_epi32(reinterpret_cast<const int*>(at), words);
    const __m256i lo = _mm256_and_si256(v, nibble);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
    for (int i = 0; i < M; ++i)
      part[i] = IntDot::template Quarter<(M > 1)>(part[i], lo, hi, q + i * row_bytes + 128 * t);
  }
  // The half's (scale, minimum) pairs, kPairsPerHalf 32-bit words of them
  // (fewer past the row's last block); PairIndexYmm reads no lane past those.
  const int* pairs_at = reinterpret_cast<const int*>(p + 2 * h * kPairsPerHalf);
  __m256i pairs;
  if constexpr (!kWhole) {
    pairs = _mm256_maskload_epi32(pairs_at, FirstWords(nh * kInt4Block / G));
  } else if constexpr (kPairsPerHalf == 8) {
    pairs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pairs_at));
  } else if constexpr (kPairsPerHalf == 4) {
    pairs = _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pairs_at)));
  } else {
    pairs = _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(pairs_at)));
  }
  const __m256 s = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_permutevar8x32_epi32(pairs, PairIndexYmm<G>()), 16));
  for (int i = 0; i < M; ++i) {
    const __m256i sum = IntDot::Finish(part[i]);
    const __m256 scale =
        _mm256_mul_ps(s, _mm256_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16 + 8 * h));
    acc[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[i][h]);
  }
}

// M x rows (from row i0 of x) against one weight row, lanes [0, 8) of each
// row if kLow (acc[i][0]) and [8, 16) if kHigh (acc[i][1]): every span,
// then the minimums. The halves are template arguments so that acc[i][h]
// names a register, never a slot in memory.
template <typename IntDot, int64_t G, int M, bool kStream, bool kLow, bool kHigh>
[[gnu::always_inline]] inline void HalvesI4Ymm(const uint8_t* w, const uint16_t* params,
                                               const I4Rows& x, int64_t i0, __m256 (*acc)[2]) {
  constexpr int64_t kPairsPerHalf = 8 * kInt4Block / G;
  const int64_t in = x.in, blocks = in / kInt4Block;
  for (int64_t c = 0; c * kInt4SpanBlocks < blocks; ++c) {
    // n blocks in this span (16 but for the last).
    const int64_t n = std::min(kInt4SpanBlocks, blocks - c * kInt4SpanBlocks);
    const uint8_t* ws = w + c * kInt4SpanWeightBytes;
    const uint16_t* p = params + 2 * c * 2 * kPairsPerHalf;
    if constexpr (kStream) {
      for (int t = 0; t < 4; ++t)
        PrefetchAt<_MM_HINT_T1>(ws + 64 * t, kStreamPrefetchBytes);
    }
    if (n < kInt4InterleavedBlocks) {
      PlainSpanYmm<IntDot, G, M, kLow, kHigh>(ws, p, x, i0, c, n, acc);
      continue;
    }
    // The first half is whole in every interleaved span, the second in a
    // whole span only.
    if constexpr (kLow) InterleavedHalfYmm<IntDot, G, M, 0, true>(ws, n, p, x, i0, c, acc);
    if constexpr (kHigh) {
      if (n == kInt4SpanBlocks) {
        InterleavedHalfYmm<IntDot, G, M, 1, true>(ws, n, p, x, i0, c, acc);
      } else if (n > 8) {
        InterleavedHalfYmm<IntDot, G, M, 1, false>(ws, n, p, x, i0, c, acc);
      }
    }
  }
  // The minimums: A_{g % 16} += m_g · S_g, lanes [0, 8) then [8, 16).
  const int64_t groups = in / G, row_sums = I4RowGroupSums(in, G);
  const __m256i high_half = _mm256_set1_epi32(kBf16HighHalf);
  auto minimums = [&]<int h>(int64_t g0) {
    if (g0 >= groups) return;
    const int64_t n = std::min<int64_t>(8, groups - g0);
    const __m256 mins = _mm256_castsi256_ps(_mm256_and_si256(
        _mm256_maskload_epi32(reinterpret_cast<const int*>(params + 2 * g0), FirstWords(n)),
        high_half));
    for (int i = 0; i < M; ++i) {
      const __m256 sums = _mm256_loadu_ps(x.group_sum + (i0 + i) * row_sums + g0);
      acc[i][h] = _mm256_fmadd_ps(mins, sums, acc[i][h]);
    }
  };
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    if constexpr (kLow) minimums.template operator()<0>(g0);
    if constexpr (kHigh) minimums.template operator()<1>(g0 + 8);
  }
}

// M x rows (from row i0 of x) against one weight row: each row's 16 lanes.
// Up to two rows take both halves in one pass; four rows take half [0, 8)
// of every span, then half [8, 16) (the row is in L1 by then), so that only
// four accumulators and one half's unpacked quarters need registers: both
// halves at once would hold eight accumulators and eight quarters, all
// sixteen ymm registers, and spill. Each lane's sum is the same either way.
template <typename IntDot, int64_t G, int M, bool kStream>
inline void DotsI4Ymm(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                      float* dots) {
  __m256 acc[M][2];
  for (int i = 0; i < M; ++i)
    acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  if constexpr (M > 2) {
    HalvesI4Ymm<IntDot, G, M, kStream, true, false>(w, params, x, i0, acc);
    HalvesI4Ymm<IntDot, G, M, false, false, true>(w, params, x, i0, acc);
  } else {
    HalvesI4Ymm<IntDot, G, M, kStream, true, true>(w, params, x, i0, acc);
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
