// Helpers shared by the AVX2+FMA kernel files (dense_kernels_avx2.cc, and the
// matrows files through dense_kernels_rows.h), the only includers:
// everything here needs -mavx2 -mfma and has internal linkage (an anonymous
// namespace), so no copy compiled with AVX2 can be picked by the linker for a
// file built without.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace medq::engine::kernels {
namespace {

// Loads eight consecutive weights as float32.
inline __m256 Load8(const float* p) {
  return _mm256_loadu_ps(p);
}

// bf16 is the upper half of a float32: zero-extend to 32 bits, shift left 16.
inline __m256 Load8(const uint16_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

inline float Scalar(float v) {
  return v;
}
inline float Scalar(uint16_t bits) {
  return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits) << 16)));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum + Σ w[j]·x[j] for j in [k, in), one fused multiply-add at a time: the
// scalar tail of every one-row dot product here, written once so that each
// kernel rounds its tail the same way. The FMA is spelled out: GCC contracts
// `sum += w * x` to one by itself, but in a file built with AVX-512 too it
// vectorized the products and added them in order, two roundings a term.
template <typename T>
inline float AddTail(float sum, const T* w, const float* x, int64_t k, int64_t in) {
  for (; k < in; ++k) {
    sum = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(Scalar(w[k])), _mm_set_ss(x[k]), _mm_set_ss(sum)));
  }
  return sum;
}

}  // namespace
}  // namespace medq::engine::kernels
