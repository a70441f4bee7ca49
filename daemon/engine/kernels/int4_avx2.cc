// AVX2+FMA kernels for int4 weights in groups with a bf16 scale and minimum
// each (the int4 entries of dense_kernels.h, MatVecI4Fn). Built with -mavx2
// -mfma like the other *_avx2.cc files, called only after the runtime check
// in cpu_features.cc; everything but the entries has internal linkage.
//
// A product reads x as PrepareI4Rows quantized it: each quarter of a half
// span (word t of eight blocks) split into its low and high nibbles is 32
// unsigned bytes, which vpmaddubsw multiplies by the 32 int8 values of x in
// the same places and adds in pairs (at most 2 · 15 · 128, no saturation),
// and vpmaddwd by ones sums to eight 32-bit lanes of a block each: half of
// the 16 lanes of dense_kernels.h's contract, the same integers as VNNI's
// vpdpbusd (int4_rows.h has the rest of the
// product and the row loops; prepare_x_avx2.cc has x's preparation).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "daemon/engine/kernels/int4_rows.h"

namespace medq::engine::kernels {
namespace {

// AVX2's integer sums of DotsI4Ymm (int4_rows.h). A pair of products is
// at most 2 · 15 · 128 in magnitude, so the pairs of all four quarters, low
// and high nibbles, add up in 16 bits (at most 30720) before one vpmaddwd.
struct MaddubsDot {
  // 16-bit pair sums, widened once by Finish. kInOrder: the adds saturate,
  // which they never need to (the bound above), so that GCC keeps them in
  // order; it reassociates wrapping adds, and with four rows would take
  // every row's eight products first and spill them.
  template <bool kInOrder>
  static __m256i Quarter(__m256i part, __m256i lo, __m256i hi, const int8_t* q) {
    const auto* x = reinterpret_cast<const __m256i*>(q);
    const __m256i a = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(x));
    const __m256i b = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(x + 2));
    if constexpr (kInOrder) return _mm256_adds_epi16(_mm256_adds_epi16(part, a), b);
    return _mm256_add_epi16(_mm256_add_epi16(part, a), b);
  }
  static __m256i Finish(__m256i part) { return _mm256_madd_epi16(part, _mm256_set1_epi16(1)); }
};
using DotsI4Avx2 = DotsI4YmmRows<MaddubsDot>;

}  // namespace

void MatVecI4Avx2(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                  float* y, int64_t row_begin, int64_t row_end) {
  MatVecI4Rows<DotsI4Avx2>(w, params, x, bias, y, row_begin, row_end);
}

void MatRowsI4Avx2(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI4Tiles<DotsI4Avx2>(w, params, x, out, m, bias, y, row_begin, row_end);
}

void DequantizeI4Avx2(const uint8_t* w, const uint16_t* params, int64_t rows, int64_t in,
                      int64_t group, float* dst) {
  const __m256i nibble = _mm256_set1_epi32(0xF);
  const int64_t groups = in / group, blocks = in / kInt4Block;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * (in / 2);
    const uint16_t* pr = params + r * 2 * groups;
    float* d = dst + r * in;
    __m256 s = _mm256_setzero_ps(), m = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t k = b * kInt4Block;
      if (k % group == 0) {
        s = _mm256_set1_ps(Scalar(pr[2 * (k / group)]));
        m = _mm256_set1_ps(Scalar(pr[2 * (k / group) + 1]));
      }
      // The block's four words, from the quarters of its span.
      const int64_t span = b / kInt4SpanBlocks, l = b % kInt4SpanBlocks;
      const int64_t n = Int4SpanLength(blocks, span);
      const uint8_t* at = wr + span * kInt4SpanWeightBytes;
      int32_t word[4];
      for (int t = 0; t < 4; ++t)
        std::memcpy(&word[t], at + Int4WordAt(n, l, t), 4);
      const __m128i block = _mm_setr_epi32(word[0], word[1], word[2], word[3]);
      const __m256i v0 = _mm256_cvtepu8_epi32(block);
      const __m256i v1 = _mm256_cvtepu8_epi32(_mm_srli_si128(block, 8));
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
