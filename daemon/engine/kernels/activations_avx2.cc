// The AVX2+FMA table's silu_mul_f32 (dense_kernels.h), built with -mavx2
// -mfma: eight elements at a time with a polynomial exp, the scalar std::exp
// for the tail.
//
// Why: the decode step's SiLU took a libm expf call per element of the
// intermediate width, every layer and sequence: with four SmolLM-135M
// sequences about 0.35 ms of a step, on one thread while the other core
// waited (bench/engine/README.md).
#include <immintrin.h>

#include <cmath>

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// exp(x) for eight floats: x = n·ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2 (ln2 split in two parts so that r is exact to float32's
// precision), exp(r) by Cephes' degree-6 polynomial, then the exponent field
// of 2^n. Within one ulp of std::exp on [-87, 88] (every seventh float32
// there, checked once). Below -87 the result is exp(-87) (about 1.6e-38)
// rather than a subnormal or 0, and above 88 it is infinity, where std::exp
// overflows only past 88.72. The SiLU below sees neither edge: 1 + exp(-g) is
// 1 for g > 87 either way, and for g < -88 its quotient g / (1 + exp(-g)) is
// -0 here against at most 6e-37 in magnitude with std::exp.
inline __m256 Exp8(__m256 x) {
  const __m256 overflow = _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // n is in [-126, 127]: 2^n is a normal float with exponent field n + 127.
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_blendv_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)),
                          _mm256_set1_ps(__builtin_inff()), overflow);
}

}  // namespace

// The same expression as the scalar table's, g / (1 + exp(-g)) · up, with
// the division kept (not a reciprocal estimate).
void SiluMulAvx2(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 g = _mm256_loadu_ps(gate + j);
    const __m256 e = Exp8(_mm256_xor_ps(g, sign));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + j, _mm256_mul_ps(silu, _mm256_loadu_ps(up + j)));
  }
  for (; j < n; ++j)
    out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
}

}  // namespace medq::engine::kernels
