// x rounded to int8 for the int4 and int8 products with AVX2, a block
// (dense_kernels.h, quantize_x_block) or an int8 span (quantize_x_span) at
// a time: the largest magnitude, the scale and the rounding are vector
// operations, exact and so the scalar table's bits whatever the order. Built with -mavx2 -mfma like
// the other
// *_avx2.cc files; the AVX-512VL table shares it.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// The largest |x| of the 32 values at x, and whether all are finite.
inline float BlockAbsMax(const float* x, bool& finite) {
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 mx = _mm256_setzero_ps();
  __m256 bad = _mm256_setzero_ps();
  for (int t = 0; t < 32; t += 8) {
    const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + t), abs);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, largest, _CMP_NLE_UQ));
    mx = _mm256_max_ps(mx, a);
  }
  finite = _mm256_movemask_ps(bad) == 0;
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// The 32 values at x times id, rounded to nearest even and saturated to
// int8, in order at lo (the first 16) and hi (the last 16); returns their sum.
inline int32_t QuantizeBlock(const float* x, float id, int8_t* lo, int8_t* hi) {
  const __m256 f = _mm256_set1_ps(id);
  const __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), f));
  const __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), f));
  const __m256i v2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), f));
  const __m256i v3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), f));
  // The packs work within 128-bit lanes; the permute puts the dwords back
  // in order.
  const __m256i bytes = _mm256_permutevar8x32_epi32(
      _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3)),
      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm256_castsi256_si128(bytes));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hi), _mm256_extracti128_si256(bytes, 1));
  // The int8 values' sum (exact): sign-extended back from the packed bytes.
  const __m256i wide =
      _mm256_add_epi32(_mm256_cvtepi8_epi32(_mm256_castsi256_si128(bytes)),
                       _mm256_cvtepi8_epi32(_mm_srli_si128(_mm256_castsi256_si128(bytes), 8)));
  const __m128i high = _mm256_extracti128_si256(bytes, 1);
  const __m256i wide2 =
      _mm256_add_epi32(_mm256_cvtepi8_epi32(high), _mm256_cvtepi8_epi32(_mm_srli_si128(high, 8)));
  __m256i sum8 = _mm256_add_epi32(wide, wide2);
  __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
  sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(1, 0, 3, 2)));
  sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(sum4);
}

}  // namespace

// quantize_x_block (dense_kernels.h): a block shorter than 32 is padded with
// zeros, which change neither its largest magnitude nor its sum, and
// written whole (zeros past n).
int32_t QuantizeXBlockAvx2(const float* x, int64_t n, int8_t* lo, int8_t* hi, float* d) {
  alignas(32) float padded[32] = {};
  if (n < 32) {
    std::memcpy(padded, x, static_cast<size_t>(n) * sizeof(float));
    x = padded;
  }
  bool finite = true;
  const float amax = BlockAbsMax(x, finite);
  *d = 0.0f;
  if (!finite) {
    *d = std::numeric_limits<float>::quiet_NaN();
    return 0;
  }
  if (!(amax >= 1e-30f)) return 0;
  *d = amax / 127.0f;
  return QuantizeBlock(x, 127.0f / amax, lo, hi);
}

// quantize_x_span (dense_kernels.h): a whole span in registers. Eight
// floats j of a chunk (j < 8) are the blocks 2j (low half) and 2j + 1 (high
// half), four values each, so that each block's largest magnitude, scale and
// sum are a half register's; the values round in place. A span of whole
// chunks (n a multiple of 64, as the widths of models are) goes so; any
// other, block by block.
void QuantizeXSpanAvx2(const float* x, int64_t n, int8_t* q, float* d, int32_t* offset) {
  if (n % kInt8Chunk != 0) {
    QuantizeXSpanWith(&QuantizeXBlockAvx2, x, n, q, d, offset);
    return;
  }
  const int64_t chunks = n / kInt8Chunk;
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 largest = _mm256_set1_ps(std::numeric_limits<float>::max());
  __m256 mx[8], bad[8];
  for (int j = 0; j < 8; ++j)
    mx[j] = bad[j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    for (int j = 0; j < 8; ++j) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + 64 * c + 8 * j), abs);
      bad[j] = _mm256_or_ps(bad[j], _mm256_cmp_ps(a, largest, _CMP_NLE_UQ));
      mx[j] = _mm256_max_ps(mx[j], a);
    }
  }
  // Each half's largest (and any non-finite) in all four of its lanes; the
  // blocks' d and 127 / amax, 0 where the block rounds to zeros (amax <
  // 1e-30, or a value not finite: then d is NaN).
  __m256 id[8], keep[8];
  const __m256 k127 = _mm256_set1_ps(127.0f), tiny = _mm256_set1_ps(1e-30f);
  for (int j = 0; j < 8; ++j) {
    __m256 m = _mm256_max_ps(mx[j], _mm256_permute_ps(mx[j], _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, _MM_SHUFFLE(2, 3, 0, 1)));
    __m256 b = _mm256_or_ps(bad[j], _mm256_permute_ps(bad[j], _MM_SHUFFLE(1, 0, 3, 2)));
    b = _mm256_or_ps(b, _mm256_permute_ps(b, _MM_SHUFFLE(2, 3, 0, 1)));
    keep[j] = _mm256_andnot_ps(b, _mm256_cmp_ps(m, tiny, _CMP_GE_OQ));
    id[j] = _mm256_div_ps(k127, m);
    const __m256 dj = _mm256_or_ps(_mm256_and_ps(keep[j], _mm256_div_ps(m, k127)),
                                   _mm256_and_ps(b, _mm256_set1_ps(std::nanf(""))));
    d[2 * j] = _mm256_cvtss_f32(dj);
    d[2 * j + 1] = _mm_cvtss_f32(_mm256_extractf128_ps(dj, 1));
  }
  __m256i sum[8];
  for (int j = 0; j < 8; ++j)
    sum[j] = _mm256_setzero_si256();
  for (int64_t c = 0; c < chunks; ++c) {
    __m256i v[8];
    for (int j = 0; j < 8; ++j) {
      const __m256 scaled = _mm256_mul_ps(_mm256_loadu_ps(x + 64 * c + 8 * j), id[j]);
      v[j] = _mm256_cvtps_epi32(_mm256_and_ps(scaled, keep[j]));
      sum[j] = _mm256_add_epi32(sum[j], v[j]);
    }
    // As QuantizeBlock: the packs work within 128-bit lanes; the permute
    // puts the dwords back in order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(v[4 * h], v[4 * h + 1]),
                             _mm256_packs_epi32(v[4 * h + 2], v[4 * h + 3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 64 * c + 32 * h), bytes);
    }
  }
  for (int j = 0; j < 8; ++j) {
    __m256i s = _mm256_add_epi32(sum[j], _mm256_shuffle_epi32(sum[j], _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm256_add_epi32(s, _mm256_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    offset[2 * j] = -128 * _mm256_cvtsi256_si32(s);
    offset[2 * j + 1] = -128 * _mm_cvtsi128_si32(_mm256_extracti128_si256(s, 1));
  }
}

}  // namespace medq::engine::kernels
