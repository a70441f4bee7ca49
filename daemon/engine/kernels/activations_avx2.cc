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

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

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
