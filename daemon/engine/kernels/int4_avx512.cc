// The AVX-512VL table's int4 kernels (dense_kernels.h, MatVecI4Fn): a block
// of 32 weights is 16 bytes, widened to sixteen 32-bit lanes whose low
// nibbles are weights 0..15 and, shifted by four, 16..31. A permute takes
// only an index's low four bits, so each nibble picks its dequantized value
// (fma(q, s, m), one rounding, the AVX2 kernels' bits) straight from a
// register of the group's 16 values: one shift, two permutes and two FMAs a
// block, where AVX2 converts and dequantizes every weight. Four 16-wide
// accumulators a row (lanes k % 64) give four FMA chains; tiles of up to
// four x rows (16 accumulators) share each dequantized block. Built with
// -mavx2 -mfma -mavx512f -mavx512vl, called only where cpu_features.cc found
// AVX-512VL.
#include <immintrin.h>

#include <cstring>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

// GCC 12 reports the undefined pass-through operand inside the 512-bit
// intrinsics as uninitialized once they are inlined (GCC bug 105593); that
// operand is never read. As in dense_kernels_rows_avx512.cc, the warnings
// are off for this file's code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace medq::engine::kernels {
namespace {

// The 16 values fma(q, s, m) for q = 0..15 of the group whose scale and
// minimum are at p: the pair is one 32-bit load (scale in the low half, the
// minimum in the high one), broadcast once; a shift and a mask make the two
// bf16 values float32, as Scalar() does.
inline __m512 GroupTable(const uint16_t* p) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int32_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  const __m512i both = _mm512_set1_epi32(pair);
  const __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(both, 16));
  const __m512 m = _mm512_castsi512_ps(_mm512_and_si512(both, _mm512_set1_epi32(kBf16HighHalf)));
  return _mm512_fmadd_ps(iota, s, m);
}

// dots[i] = the dot product of the row at w with x row i (row stride in),
// for the M x rows at x, in dense_kernels.h's order. The group size G is a
// template argument: with a runtime group, finding where a group starts cost
// an integer division every 32 weights, more than the block's arithmetic
// (kernels_bench --only quantized, bench/kernels/README.md).
template <int64_t G, int M, bool kStream>
inline void DotsI4(const uint8_t* w, const uint16_t* params, int64_t in, const float* x,
                   float* dots) {
  __m512 a[M], b[M], c[M], d[M];
  for (int i = 0; i < M; ++i) {
    a[i] = _mm512_setzero_ps();
    b[i] = _mm512_setzero_ps();
    c[i] = _mm512_setzero_ps();
    d[i] = _mm512_setzero_ps();
  }
  __m512 table = _mm512_setzero_ps();
  const auto block = [&](int64_t k, __m512* lo, __m512* hi) {
    if (k % G == 0) table = GroupTable(params + 2 * (k / G));
    const __m512i v =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k / 2)));
    const __m512 w0 = _mm512_permutexvar_ps(v, table);
    const __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
    for (int i = 0; i < M; ++i) {
      const float* xi = x + i * in + k;
      lo[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xi), lo[i]);
      hi[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xi + 16), hi[i]);
    }
  };
  int64_t k = 0;
  for (; k + 64 <= in; k += 64) {
    if constexpr (kStream) {
      if ((k & 64) == 0) PrefetchAt<_MM_HINT_T1>(w + k / 2, kStreamPrefetchBytes);
    }
    block(k, a, b);
    block(k + 32, c, d);
  }
  if (k < in) block(k, a, b);  // in % 64 == 32
  for (int i = 0; i < M; ++i) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(a[i], b[i]), _mm512_add_ps(c[i], d[i]));
    const __m256 low = _mm512_castps512_ps256(sum);
    const __m256 high = _mm512_castps512_ps256(_mm512_shuffle_f32x4(sum, sum, 0xEE));
    dots[i] = HorizontalSum(_mm256_add_ps(low, high));
  }
}

inline float AddBias(float dot, const float* bias, int64_t r) {
  if (bias == nullptr) return dot;
  return _mm_cvtss_f32(_mm_add_ss(_mm_set_ss(dot), _mm_set_ss(bias[r])));
}

template <int64_t G>
void MatVecI4Avx512Group(const uint8_t* w, const uint16_t* params, int64_t in, const float* x,
                         const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  const int64_t groups = in / G;
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    DotsI4<G, 1, true>(w + r * (in / 2), params + r * 2 * groups, in, x, &dot);
    y[r] = AddBias(dot, bias, r);
  }
}

template <int64_t G>
void MatRowsI4Avx512Group(const uint8_t* w, const uint16_t* params, int64_t in, int64_t out,
                          const float* x, int64_t m, const float* bias, float* y, int64_t row_begin,
                          int64_t row_end) {
  const int64_t groups = in / G;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* wr = w + r * (in / 2);
    const uint16_t* pr = params + r * 2 * groups;
    float dots[4];
    int64_t i = 0;
    // The first tile reads the row from memory (and prefetches ahead), the
    // later ones find it in L1.
    const auto tile = [&]<int T>() {
      if (i == 0) {
        DotsI4<G, T, true>(wr, pr, in, x, dots);
      } else {
        DotsI4<G, T, false>(wr, pr, in, x + i * in, dots);
      }
      for (int j = 0; j < T; ++j)
        y[(i + j) * out + r] = AddBias(dots[j], bias, r);
      i += T;
    };
    while (i + 4 <= m)
      tile.template operator()<4>();
    if (i + 2 <= m) tile.template operator()<2>();
    if (i < m) tile.template operator()<1>();
  }
}

}  // namespace

// group is 32, 64 or 128 (dense_kernels.h), each its own instance.
void MatVecI4Avx512(const uint8_t* w, const uint16_t* params, int64_t in, int64_t group,
                    const float* x, const float* bias, float* y, int64_t row_begin,
                    int64_t row_end) {
  WithInt4Group(group, [&](auto g) {
    MatVecI4Avx512Group<decltype(g)::value>(w, params, in, x, bias, y, row_begin, row_end);
  });
}

void MatRowsI4Avx512(const uint8_t* w, const uint16_t* params, int64_t in, int64_t group,
                     int64_t out, const float* x, int64_t m, const float* bias, float* y,
                     int64_t row_begin, int64_t row_end) {
  WithInt4Group(group, [&](auto g) {
    MatRowsI4Avx512Group<decltype(g)::value>(w, params, in, out, x, m, bias, y, row_begin, row_end);
  });
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
