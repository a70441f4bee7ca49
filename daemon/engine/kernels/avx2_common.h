// Helpers shared by the AVX2+FMA kernel files (dense_kernels_avx2.cc,
// activations_avx2.cc, attention_avx2.cc, and the matrows files through
// dense_kernels_rows.h), the only includers:
// everything here needs -mavx2 -mfma and has internal linkage (an anonymous
// namespace), so no copy compiled with AVX2 can be picked by the linker for a
// file built without.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

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

// An int8 weight as float32 (exact).
inline float Scalar(int8_t v) {
  return static_cast<float>(v);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A 32-bit lane of loaded bf16 weights holds element 2j in its low half and
// 2j + 1 in its high half: a shift by 16 gives element 2j as a float, and
// this mask element 2j + 1.
constexpr int kBf16HighHalf = static_cast<int>(0xFFFF0000u);

// The 16 floats at x split into their 8 even-indexed elements (to even) and
// their 8 odd-indexed ones (to odd), each in order: how the bf16 kernels lay
// out x against weights split by a shift and a mask (SplitDotBf16).
inline void SplitEvenOdd16(const float* x, float* even, float* odd) {
  const __m256 a = _mm256_loadu_ps(x);
  const __m256 b = _mm256_loadu_ps(x + 8);
  // shuffle_ps works within 128-bit lanes: [a0 a2 b0 b2 | a4 a6 b4 b6], and
  // the 64-bit permute puts the pairs in order.
  const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  _mm256_storeu_ps(even, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
  _mm256_storeu_ps(odd, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8)));
}

// x for SplitDotBf16 and the one-row tiles: per block of 16, its 8
// even-indexed elements, then its 8 odd-indexed ones; the tail (in % 16)
// stays in place.
inline void PrepareBf16X(const float* x, int64_t in, float* split) {
  int64_t k = 0;
  for (; k + 16 <= in; k += 16)
    SplitEvenOdd16(x + k, split + k, split + k + 8);
  for (; k < in; ++k)
    split[k] = x[k];
}

// A prefetch never faults, so the address may lie past the matrix; it is
// computed as an integer, not as a pointer out of bounds. Hint: _MM_HINT_T0
// brings the line into every cache level, _MM_HINT_T1 into L2 and below.
//
// Every prefetch helper here is always inlined. GCC counts a prefetch as no
// side effect: a helper that its early inliner leaves as a call (as it did
// inside int4_rows.h's always-inlined products) is then found to be a const
// function, and the call, whose result nobody reads, is deleted. The int4
// AVX2 and AVX-VNNI products lost every prefetch that way (objdump found
// none); with them back, the one-row int4 product from memory is 12 to 19 %
// faster (tests/kernels/check_prefetch.sh keeps watch).
template <_mm_hint Hint = _MM_HINT_T0, typename T>
[[gnu::always_inline]] inline void PrefetchAt(const T* base, int64_t offset_bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset_bytes);
  _mm_prefetch(reinterpret_cast<const char*>(at), Hint);
}

// How far ahead of the weights being read a kernel that streams its rows from
// memory (the matvecs, and the bf16 one-row tiles' first pass over a row)
// asks for the weights to come, once per 64 bytes read. Hardware prefetchers
// do not cross 4 KiB page boundaries, and most bf16 weights are views of the
// checkpoint's file mapping, on 4 KiB pages; asking 16 KiB ahead keeps memory
// streaming across them. engine_bench --batch, bf16, alternating, three
// rounds on the Zen 4 VM in a slow-memory state: one sequence (distances 0
// and 2 to 32 KiB) took SmolLM-135M's step from 14.3-14.6 ms to 11.8-12.4
// and Qwen2.5-0.5B's from 43.6-45.3 to 36.1-37.4, 4 KiB changing nothing; two
// sequences, 16.3-17.3 to 12.6-13.5 and 49.9-51.8 to 42.0-44.0.
constexpr int64_t kStreamPrefetchBytes = 16384;

// The stream prefetch fills L2, not L1 (_MM_HINT_T1): a line asked for 16 KiB
// ahead would otherwise take half of L1 on its way, evicting x and the lines
// in use. On the same VM (engine_bench --batch, two rounds alternating, read
// bandwidth 20 to 21 GB/s), one sequence: bf16 SmolLM-135M 8.8 / 10.4 ms a
// step against 10.8 / 11.3 with _MM_HINT_T0, Qwen2.5-0.5B 36.3 / 35.5
// against 36.8 / 39.2. f32 weights, copies on huge pages, had no stream
// prefetch, since one into L1 made Qwen's f32 matvec 8 to 10% slower; into L2
// it makes it faster: SmolLM 20.8 / 20.5 against 22.9 / 24.7 ms, Qwen 73.1 /
// 71.5 against 81.4 / 88.4.
//
// Every kernel here walks its rows 32 weights at a time, so a prefetch is
// per such block: every cache line of the block `ahead` bytes on from w (one
// line of bf16, two of f32), asked for with Hint.
template <_mm_hint Hint, typename T>
[[gnu::always_inline]] inline void PrefetchBlockAhead(const T* w, int64_t ahead) {
  for (int64_t line = 0; line < 32 * static_cast<int64_t>(sizeof(T)); line += 64)
    PrefetchAt<Hint>(w, ahead + line);
}

// A streaming kernel's prefetch: the block kStreamPrefetchBytes on, into L2.
template <typename T>
[[gnu::always_inline]] inline void PrefetchStreamBlock(const T* w) {
  PrefetchBlockAhead<_MM_HINT_T1>(w, kStreamPrefetchBytes);
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

// exp(x) for eight floats: x = n·ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2 (ln2 split in two parts so that r is exact to float32's
// precision), exp(r) by Cephes' degree-6 polynomial, then the exponent field
// of 2^n. Within one ulp of std::exp on [-87, 88] (every seventh float32
// there, checked once). Below -87 the result is exp(-87) (about 1.6e-38)
// rather than a subnormal or 0, and above 88 it is infinity, where std::exp
// overflows only past 88.72. The SiLU (activations_avx2.cc) sees neither
// edge: 1 + exp(-g) is 1 for g > 87 either way, and for g < -88 its quotient
// g / (1 + exp(-g)) is -0 here against at most 6e-37 in magnitude with
// std::exp. Attention's softmax (attention_avx2.cc) passes p - max <= 0: at
// worst a probability of 1.6e-38 instead of 0.
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

// Calls tile.template operator()<T>(i) for tiles of T = 4, then 2 and 1, x
// rows from row i, covering rows [0, m): the several-row kernels' tiles.
template <typename Tile>
inline void ForRowTiles(int64_t m, const Tile& tile) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4)
    tile.template operator()<4>(i);
  if (i + 2 <= m) {
    tile.template operator()<2>(i);
    i += 2;
  }
  if (i < m) tile.template operator()<1>(i);
}

// Calls f(std::integral_constant<int64_t, G>{}) for int4's group size G =
// `group` (32, 64 or 128: dense_kernels.h), so that each size is an instance
// of its own: with a runtime group, finding where a group starts cost an
// integer division every 32 weights, more than the block's arithmetic.
template <typename F>
inline void WithInt4Group(int64_t group, F&& f) {
  if (group == 32) return f(std::integral_constant<int64_t, 32>{});
  if (group == 64) return f(std::integral_constant<int64_t, 64>{});
  f(std::integral_constant<int64_t, 128>{});
}

}  // namespace
}  // namespace medq::engine::kernels
