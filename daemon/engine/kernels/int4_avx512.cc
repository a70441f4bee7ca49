// The int4 products with AVX-512 VNNI (dense_kernels.h, MatVecI4Fn): a
// span of 16 blocks (512 weights) is four 64-byte loads, quarter t holding
// word t of every block, their low and high nibbles eight registers of 64
// unsigned bytes, and each x row eight vpdpbusd against the int8 values
// PrepareI4Rows laid out in the same places: the 16 lanes of the contract,
// a block each, summed whole in integers. Then one convert, one multiply
// (the lane's scale s · d) and one FMA a span, where a lane over four weights
// of a half block took those three every two vpdpbusd. The group scales
// come in by one permute a span. A last span of fewer than eight blocks is
// plain, in chunks of four blocks, a lane a word (dense_kernels.h). Tiles of
// up to four x rows share the unpacked span (int4_rows.h's row loops). Built with -mavx2 -mfma
// -mavx512f -mavx512vl -mavx512vnni, called only where cpu_features.cc found AVX-512 VNNI
// (dense_kernels_avx2.cc's table chooses).
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

// Lane l of a span is its block l, whose group is pair l >> kGroupShift<G>
// of the span's parameters.
template <int64_t G>
inline __m512i PairIndex() {
  return _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           kGroupShift<G>);
}

// Each lane's group scale, as float32, for the span whose parameter pairs
// (scale low, minimum high) are the `pairs` dwords at p (missing ones 0).
template <int64_t G>
inline __m512 SpanScales(const uint16_t* p, int64_t pairs) {
  const __m512i raw = _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << pairs) - 1), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_permutexvar_epi32(PairIndex<G>(), raw), 16));
}

template <int64_t G, int M, bool kStream>
inline void DotsI4(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i0,
                   float* dots) {
  constexpr int64_t kPairsPerSpan = kInt4SpanBlocks * kInt4Block / G;
  const int64_t in = x.in, blocks = in / kInt4Block;
  const int64_t row_bytes = I4RowBytes(in), row_lanes = I4RowLaneScales(in);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  __m512 acc[M];
  for (int i = 0; i < M; ++i)
    acc[i] = _mm512_setzero_ps();
  // Interleaved span c of n >= 8 blocks (16 but for the last).
  const auto span = [&](int64_t c, int64_t n) {
    const uint8_t* ws = w + c * kInt4SpanWeightBytes;
    const auto lanes = static_cast<__mmask16>((1u << n) - 1);
    __m512i lo[4], hi[4];
    for (int t = 0; t < 4; ++t) {
      const __m512i v = n == kInt4SpanBlocks
                            ? _mm512_loadu_si512(ws + 64 * t)
                            : _mm512_maskz_loadu_epi32(lanes, ws + Int4WordAt(n, 0, t));
      lo[t] = _mm512_and_si512(v, nibble);
      hi[t] = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
    }
    const __m512 s = SpanScales<G>(params + 2 * c * kPairsPerSpan, n * kInt4Block / G);
    for (int i = 0; i < M; ++i) {
      const int8_t* q = x.q + (i0 + i) * row_bytes + c * kInt4SpanBytes;
      __m512i p = _mm512_setzero_si512();
      for (int t = 0; t < 4; ++t) {
        p = _mm512_dpbusd_epi32(p, lo[t], _mm512_loadu_si512(q + 128 * t));
        p = _mm512_dpbusd_epi32(p, hi[t], _mm512_loadu_si512(q + 128 * t + 64));
      }
      const __m512 scale =
          _mm512_mul_ps(s, _mm512_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[i]);
    }
  };
  // A plain span of n < 8 blocks: chunks of four, lane 4i + t = word t of
  // block 4h + i, its scale and d permuted in from the span's.
  const auto plain = [&](int64_t c, int64_t n) {
    const uint8_t* ws = w + c * kInt4SpanWeightBytes;
    const __m512i raw = _mm512_maskz_loadu_epi32(
        static_cast<__mmask16>((1u << (n * kInt4Block / G)) - 1), params + 2 * c * kPairsPerSpan);
    for (int64_t h = 0; 4 * h < n; ++h) {
      const int64_t nb = std::min<int64_t>(4, n - 4 * h);
      const __m512i v =
          _mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << (4 * nb)) - 1), ws + 64 * h);
      const __m512i lo = _mm512_and_si512(v, nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
      const __m512i block =
          _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(4 * h)),
                           _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
      const __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_permutexvar_epi32(_mm512_srli_epi32(block, kGroupShift<G>), raw), 16));
      for (int i = 0; i < M; ++i) {
        const int8_t* q = x.q + (i0 + i) * row_bytes + c * kInt4SpanBytes + 128 * h;
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(q));
        p = _mm512_dpbusd_epi32(p, hi, _mm512_loadu_si512(q + 64));
        const __m512 d = _mm512_permutexvar_ps(
            block, _mm512_loadu_ps(x.lane_scale + (i0 + i) * row_lanes + c * 16));
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(s, d), acc[i]);
      }
    }
  };
  // Every span's lines asked for ahead (the last one's too: a row of 896
  // weights is a whole span and 12 blocks).
  const auto prefetch = [&](int64_t c) {
    if constexpr (kStream) {
      for (int t = 0; t < 4; ++t)
        PrefetchAt<_MM_HINT_T1>(w + c * kInt4SpanWeightBytes + 64 * t, kStreamPrefetchBytes);
    }
  };
  const int64_t full = blocks / kInt4SpanBlocks;
  for (int64_t c = 0; c < full; ++c) {
    prefetch(c);
    span(c, kInt4SpanBlocks);
  }
  if (const int64_t rest = blocks - full * kInt4SpanBlocks; rest > 0) {
    prefetch(full);
    if (rest >= kInt4InterleavedBlocks) {
      span(full, rest);
    } else {
      plain(full, rest);
    }
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
