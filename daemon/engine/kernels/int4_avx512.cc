// The int4 products with AVX-512 VNNI (dense_kernels.h, MatVecI4Fn): a
// chunk of 128 weights is one 64-byte load, its low and high nibbles two
// registers of 64 unsigned bytes, and each x row two vpdpbusd against the
// 128 int8 values PrepareI4Rows laid out in the same places: the 16 lanes of
// the contract, four weights of a half block each, in two instructions where
// float32 FMAs took sixteen. The group scales come in by one permute a chunk
// and the lane's scale (s · d) by a multiply, shared by nothing but one FMA.
// Tiles of up to four x rows share the unpacked chunk (int4_rows.h's row
// loops). Built with -mavx2 -mfma -mavx512f -mavx512vl -mavx512vnni, called
// only where cpu_features.cc found AVX-512 VNNI (dense_kernels_avx2.cc's
// table chooses).
#include "daemon/engine/kernels/int4_rows.h"

// GCC 12 reports the undefined pass-through operand inside the 512-bit
// intrinsics as uninitialized once they are inlined (GCC bug 105593); that
// operand is never read. As in dense_kernels_rows_avx512.cc, the warnings
// are off for this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace medq::engine::kernels {
namespace {

// Lane l of a chunk belongs to block l / 4, whose group is pair (l / 4) /
// (G / 32) of the chunk's parameters.
template <int64_t G>
inline __m512i PairIndex() {
  constexpr int kPerGroup = static_cast<int>(G / kInt4Block) * 4;
  return _mm512_setr_epi32(0 / kPerGroup, 1 / kPerGroup, 2 / kPerGroup, 3 / kPerGroup,
                           4 / kPerGroup, 5 / kPerGroup, 6 / kPerGroup, 7 / kPerGroup,
                           8 / kPerGroup, 9 / kPerGroup, 10 / kPerGroup, 11 / kPerGroup,
                           12 / kPerGroup, 13 / kPerGroup, 14 / kPerGroup, 15 / kPerGroup);
}

// Each lane's group scale, as float32, for the chunk whose parameter pairs
// (scale low, minimum high) are the `pairs` dwords at p (missing ones 0).
template <int64_t G>
inline __m512 ChunkScales(const uint16_t* p, int pairs) {
  const __m512i raw = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << pairs) - 1), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_permutexvar_epi32(PairIndex<G>(), raw), 16));
}

template <int64_t G, int M, bool kStream>
inline void DotsI4(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                   float* dots) {
  constexpr int64_t kPairsPerChunk = kInt4Chunk / G;
  const int64_t in = x.in, blocks = in / kInt4Block;
  const int64_t row_bytes = I4RowBytes(in), row_lanes = I4RowLaneScales(in);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm512_setzero_ps();
  const auto chunk = [&](int64_t c, __m512i v, __m512 s) {
    const __m512i lo = _mm512_and_si512(v, nibble);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
    for (int i = 0; i < M; ++i) {
      const int8_t* q = x.q + (i0 + i) * row_bytes + c * kInt4Chunk;
      __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(q));
      p = _mm512_dpbusd_epi32(p, hi, _mm512_loadu_si512(q + 64));
      const __m512 scale =
          _mm512_mul_ps(s, _mm512_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[i]);
    }
  };
  const int64_t full = blocks / 4;
  for (int64_t c = 0; c < full; ++c) {
    if constexpr (kStream) PrefetchAt<_MM_HINT_T1>(w + c * 64, kStreamPrefetchBytes);
    chunk(c, _mm512_loadu_si512(w + c * 64),
          ChunkScales<G>(params + 2 * c * kPairsPerChunk, static_cast<int>(kPairsPerChunk)));
  }
  if (const int64_t rest = blocks - 4 * full; rest > 0) {  // 1 to 3 blocks
    const int pairs = static_cast<int>((rest * kInt4Block + G - 1) / G);
    chunk(full,
          _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << (4 * rest)) - 1), w + full * 64),
          ChunkScales<G>(params + 2 * full * kPairsPerChunk, pairs));
  }
  // The minimums: A_{g % 16} += m_g · S_g.
  const int64_t groups = in / G, row_sums = I4RowGroupSums(in, G);
  const __m512i high_half = _mm512_set1_epi32(kBf16HighHalf);
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    const int64_t n = std::min<int64_t>(16, groups - g0);
    const __m512 mins = _mm512_castsi512_ps(_mm512_and_si512(
        _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << n) - 1), params + 2 * g0),
        high_half));
    for (int i = 0; i < M; ++i)
      acc[i] =
          _mm512_fmadd_ps(mins, _mm512_loadu_ps(x.group_sum + (i0 + i) * row_sums + g0), acc[i]);
  }
  for (int i = 0; i < M; ++i) {
    const __m256 low = _mm512_castps512_ps256(acc[i]);
    const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[i]), 1));
    dots[i] = HorizontalSum(_mm256_add_ps(low, high));
  }
}

struct DotsI4Zmm {
  template <int64_t G, int M, bool kStream>
  static void Run(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                  float* dots) {
    DotsI4<G, M, kStream>(w, params, x, i0, dots);
  }
};

}  // namespace

void MatVecI4Vnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                  float* y, int64_t row_begin, int64_t row_end) {
  MatVecI4Rows<DotsI4Zmm>(w, params, x, bias, y, row_begin, row_end);
}

void MatRowsI4Vnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI4Tiles<DotsI4Zmm>(w, params, x, out, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
