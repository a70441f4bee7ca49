// AVX2+FMA kernels for int4 weights in groups with a bf16 scale and minimum
// each (the int4 entries of dense_kernels.h, MatVecI4Fn). Built with -mavx2
// -mfma like the other *_avx2.cc files, called only after the runtime check
// in cpu_features.cc; everything but the entries has internal linkage.
//
// A product reads x as prepare_i4 quantized it: 32 bytes of a weight row
// (two blocks, 64 weights) split into their low and high nibbles are 32
// unsigned bytes each, which vpmaddubsw multiplies by the 32 int8 values of
// x in the same places and adds in pairs (at most 2 · 15 · 128, no
// saturation), and vpmaddwd by ones sums to eight 32-bit lanes of four
// weights each: half of the 16 lanes of dense_kernels.h's contract, the
// same integers as VNNI's vpdpbusd (int4_rows.h has the rest of the
// product and the row loops).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "daemon/engine/kernels/int4_rows.h"

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

// AVX2's integer sums of DotsI4Ymm (int4_rows.h).
struct MaddubsDot {
  static __m256i Sum(__m256i lo, __m256i hi, __m256i xlo, __m256i xhi) {
    const __m256i pairs =
        _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  }
};
using DotsI4Avx2 = DotsI4YmmRows<MaddubsDot>;

}  // namespace

void PrepareI4Avx2(const float* x, int64_t m, int64_t in, int64_t group, int8_t* q,
                   float* lane_scale, float* group_sum) {
  const int64_t row_bytes = I4RowBytes(in), lanes = I4RowLaneScales(in);
  const int64_t sums = I4RowGroupSums(in, group);
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * in;
    int8_t* qi = q + i * row_bytes;
    float* li = lane_scale + i * lanes;
    float* gi = group_sum + i * sums;
    std::fill(qi, qi + row_bytes, int8_t{0});
    std::fill(li, li + lanes, 0.0f);
    std::fill(gi, gi + sums, 0.0f);
    for (int64_t b = 0; b < in / kInt4Block; ++b) {
      const float* xb = xi + b * kInt4Block;
      bool finite = true;
      const float amax = BlockAbsMax(xb, finite);
      float d = 0.0f;
      int32_t sum = 0;
      int8_t* chunk = qi + (b / 4) * kInt4Chunk + (b % 4) * 16;
      if (!finite) {
        d = std::numeric_limits<float>::quiet_NaN();
      } else if (amax >= 1e-30f) {
        d = amax / 127.0f;
        sum = QuantizeBlock(xb, 127.0f / amax, chunk, chunk + 64);
      }
      for (int64_t l = 0; l < 4; ++l)
        li[(b / 4) * 16 + (b % 4) * 4 + l] = d;
      float& s = gi[b * kInt4Block / group];
      s = std::fma(d, static_cast<float>(sum), s);
    }
  }
}

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
