// The AVX2+FMA table's attention kernels (dense_kernels.h), built with -mavx2
// -mfma: scores_f32 four cached keys at a time, softmax_f32 with the SiLU's
// polynomial exp (Exp8, avx2_common.h).
//
// Why: the decode step's attention computed each key's score as a one-row
// matvec (one horizontal sum and a 16 KiB prefetch per key) and its softmax
// with a libm expf call per key, so four SmolLM-135M sequences' attention
// took about 1 ms of a 20 ms step on the 2-core Zen 3 VM, and at 512
// positions read its cache at 10 to 12 GB/s, half of what memory gives
// (bench/kernels/README.md).
#include <immintrin.h>

#include <cmath>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// The four sums of a, b, c, d (lanes added pairwise, then the halves):
// [Σa, Σb, Σc, Σd]. One key's score reduces as Sum4(v, v, v, v)[0], so that a
// key scores the same bits whether it is one of four or alone.
inline __m128 Sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

}  // namespace

// Four keys a step: each 8-wide block of q is loaded once for the four, and
// their four sums end in one reduction, where a one-row matvec a key reduced
// each alone. Every key's score is its eight-lane sum in k order, Sum4's
// reduction, then the scalar tail (AddTail): the same for every key whatever
// n is.
void ScoresF32Avx2(const float* keys, int64_t n, int64_t d, const float* q, float scale,
                   float* scores) {
  const int64_t blocks = d / 8 * 8;
  int64_t s = 0;
  for (; s + 4 <= n; s += 4) {
    const float* k0 = keys + s * d;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < blocks; k += 8) {
      const __m256 qv = _mm256_loadu_ps(q + k);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + k), qv, a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + d + k), qv, a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + 2 * d + k), qv, a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(k0 + 3 * d + k), qv, a3);
    }
    alignas(16) float sums[4];
    _mm_store_ps(sums, Sum4(a0, a1, a2, a3));
    for (int64_t j = 0; j < 4; ++j)
      scores[s + j] = AddTail(sums[j], k0 + j * d, q, blocks, d) / scale;
  }
  for (; s < n; ++s) {
    const float* key = keys + s * d;
    __m256 a = _mm256_setzero_ps();
    for (int64_t k = 0; k < blocks; k += 8)
      a = _mm256_fmadd_ps(_mm256_loadu_ps(key + k), _mm256_loadu_ps(q + k), a);
    scores[s] = AddTail(_mm_cvtss_f32(Sum4(a, a, a, a)), key, q, blocks, d) / scale;
  }
}

// Eight scores at a time: the maximum, exp(p - max) with Exp8 (std::exp for
// the tail) and its sum, then each divided by the sum.
void SoftmaxF32Avx2(float* p, int64_t n) {
  const int64_t blocks = n / 8 * 8;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (int64_t s = 0; s < blocks; s += 8)
    vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(p + s));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float max = -INFINITY;
  for (const float v : lanes)
    max = std::fmax(max, v);
  for (int64_t s = blocks; s < n; ++s)
    max = std::fmax(max, p[s]);
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t s = 0; s < blocks; s += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(p + s), vm));
    _mm256_storeu_ps(p + s, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = HorizontalSum(vsum);
  for (int64_t s = blocks; s < n; ++s)
    sum += (p[s] = std::exp(p[s] - max));
  const __m256 vs = _mm256_set1_ps(sum);
  for (int64_t s = 0; s < blocks; s += 8)
    _mm256_storeu_ps(p + s, _mm256_div_ps(_mm256_loadu_ps(p + s), vs));
  for (int64_t s = blocks; s < n; ++s)
    p[s] /= sum;
}

}  // namespace medq::engine::kernels
