// AVX2+FMA kernels for int4 weights in groups with a bf16 scale and minimum
// each (the int4 entries of dense_kernels.h, MatVecI4Fn). Built with -mavx2
// -mfma like the other *_avx2.cc files, called only after the runtime check
// in cpu_features.cc; everything but the three entries has internal linkage.
//
// A block of 32 weights is 16 bytes: its first 8 bytes widened to eight
// 32-bit lanes give weights 0..7 in their low nibbles and 16..23 in their
// high ones, its last 8 bytes weights 8..15 and 24..31, so an AND or a shift
// and a conversion make eight float32 weights in order; each is dequantized
// with one FMA (q · s + m) and multiplied into one of eight accumulators
// (lanes k % 64, the order dense_kernels.h spells out). Eight accumulators a
// row leave no registers for a second x row, so the several-row kernel runs
// the rows one at a time over a weight row it reads from memory once (the
// later rows find it in L1).
#include <immintrin.h>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// The group's scale and minimum, broadcast, where a group starts at k. The
// group size G is a template argument: a runtime one cost an integer division
// every 32 weights (int4_avx512.cc).
template <int64_t G>
inline void GroupAt(const uint16_t* params, int64_t k, __m256& s, __m256& m) {
  if (k % G != 0) return;
  const uint16_t* p = params + 2 * (k / G);
  s = _mm256_set1_ps(Scalar(p[0]));
  m = _mm256_set1_ps(Scalar(p[1]));
}

// The 32 weights of the block at `block` dequantized, each times its x and
// added into a0 (weights 0..7), a1, a2, a3 (24..31).
inline void BlockI4(const uint8_t* block, __m256 s, __m256 m, const float* x, __m256& a0,
                    __m256& a1, __m256& a2, __m256& a3) {
  const __m256i nibble = _mm256_set1_epi32(0xF);
  const __m256i v0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block)));
  const __m256i v1 =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 8)));
  const __m256 q0 = _mm256_cvtepi32_ps(_mm256_and_si256(v0, nibble));
  const __m256 q1 = _mm256_cvtepi32_ps(_mm256_and_si256(v1, nibble));
  const __m256 q2 = _mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4));
  const __m256 q3 = _mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4));
  a0 = _mm256_fmadd_ps(_mm256_fmadd_ps(q0, s, m), _mm256_loadu_ps(x), a0);
  a1 = _mm256_fmadd_ps(_mm256_fmadd_ps(q1, s, m), _mm256_loadu_ps(x + 8), a1);
  a2 = _mm256_fmadd_ps(_mm256_fmadd_ps(q2, s, m), _mm256_loadu_ps(x + 16), a2);
  a3 = _mm256_fmadd_ps(_mm256_fmadd_ps(q3, s, m), _mm256_loadu_ps(x + 24), a3);
}

// One row's dot product (dense_kernels.h's order: lanes k % 64 are a0..a7).
// Stream: the row comes from memory, so a line kStreamPrefetchBytes ahead is
// asked for into L2 once a 64-byte line (128 weights).
template <int64_t G, bool kStream>
inline float DotI4(const uint8_t* w, const uint16_t* params, int64_t in, const float* x) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps(), a4 = _mm256_setzero_ps(), a5 = _mm256_setzero_ps(),
         a6 = _mm256_setzero_ps(), a7 = _mm256_setzero_ps();
  __m256 s = _mm256_setzero_ps(), m = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= in; k += 64) {
    if constexpr (kStream) {
      if ((k & 64) == 0) PrefetchAt<_MM_HINT_T1>(w + k / 2, kStreamPrefetchBytes);
    }
    GroupAt<G>(params, k, s, m);
    BlockI4(w + k / 2, s, m, x + k, a0, a1, a2, a3);
    GroupAt<G>(params, k + 32, s, m);
    BlockI4(w + k / 2 + 16, s, m, x + k + 32, a4, a5, a6, a7);
  }
  if (k < in) {  // in % 64 == 32: lanes 0..31 take the last block
    GroupAt<G>(params, k, s, m);
    BlockI4(w + k / 2, s, m, x + k, a0, a1, a2, a3);
  }
  // The 16-wide accumulators A..D are (a0, a1) .. (a6, a7).
  const __m256 low = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a4, a6));
  const __m256 high = _mm256_add_ps(_mm256_add_ps(a1, a3), _mm256_add_ps(a5, a7));
  return HorizontalSum(_mm256_add_ps(low, high));
}

// dot + bias, spelled out so that the compiler cannot fuse it differently.
inline float AddBias(float dot, const float* bias, int64_t r) {
  if (bias == nullptr) return dot;
  return _mm_cvtss_f32(_mm_add_ss(_mm_set_ss(dot), _mm_set_ss(bias[r])));
}

template <int64_t G>
void MatVecI4Avx2Group(const uint8_t* w, const uint16_t* params, int64_t in, const float* x,
                       const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  const int64_t groups = in / G;
  for (int64_t r = row_begin; r < row_end; ++r)
    y[r] = AddBias(DotI4<G, true>(w + r * (in / 2), params + r * 2 * groups, in, x), bias, r);
}

template <int64_t G>
void MatRowsI4Avx2Group(const uint8_t* w, const uint16_t* params, int64_t in, int64_t out,
                        const float* x, int64_t m, const float* bias, float* y, int64_t row_begin,
                        int64_t row_end) {
  const int64_t groups = in / G;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* wr = w + r * (in / 2);
    const uint16_t* pr = params + r * 2 * groups;
    y[r] = AddBias(DotI4<G, true>(wr, pr, in, x), bias, r);
    for (int64_t i = 1; i < m; ++i)
      y[i * out + r] = AddBias(DotI4<G, false>(wr, pr, in, x + i * in), bias, r);
  }
}

}  // namespace

// group is 32, 64 or 128 (dense_kernels.h), each its own instance.
void MatVecI4Avx2(const uint8_t* w, const uint16_t* params, int64_t in, int64_t group,
                  const float* x, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  WithInt4Group(group, [&](auto g) {
    MatVecI4Avx2Group<decltype(g)::value>(w, params, in, x, bias, y, row_begin, row_end);
  });
}

void MatRowsI4Avx2(const uint8_t* w, const uint16_t* params, int64_t in, int64_t group, int64_t out,
                   const float* x, int64_t m, const float* bias, float* y, int64_t row_begin,
                   int64_t row_end) {
  WithInt4Group(group, [&](auto g) {
    MatRowsI4Avx2Group<decltype(g)::value>(w, params, in, out, x, m, bias, y, row_begin, row_end);
  });
}

void DequantizeI4Avx2(const uint8_t* w, const uint16_t* params, int64_t rows, int64_t in,
                      int64_t group, float* dst) {
  const __m256i nibble = _mm256_set1_epi32(0xF);
  const int64_t groups = in / group;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * (in / 2);
    const uint16_t* pr = params + r * 2 * groups;
    float* d = dst + r * in;
    __m256 s = _mm256_setzero_ps(), m = _mm256_setzero_ps();
    for (int64_t k = 0; k < in; k += kInt4Block) {
      if (k % group == 0) {
        s = _mm256_set1_ps(Scalar(pr[2 * (k / group)]));
        m = _mm256_set1_ps(Scalar(pr[2 * (k / group) + 1]));
      }
      const uint8_t* block = wr + k / 2;
      const __m256i v0 =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block)));
      const __m256i v1 =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 8)));
      _mm256_storeu_ps(d + k,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v0, nibble)), s, m));
      _mm256_storeu_ps(d + k + 8,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v1, nibble)), s, m));
      _mm256_storeu_ps(d + k + 16,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v0, 4)), s, m));
      _mm256_storeu_ps(d + k + 24,
                       _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v1, 4)), s, m));
    }
  }
}

}  // namespace medq::engine::kernels
