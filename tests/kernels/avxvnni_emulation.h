// AVX-VNNI's one instruction the kernels use, vpdpbusd on 256 bits
// (_mm256_dpbusd_avx_epi32), in AVX2 instructions, so that int4_avxvnni.cc
// and int8_avxvnni.cc run on a CPU without AVX-VNNI (this project's CI
// machines are AMD Zen 3: AVX2 only; laptops from Intel Alder Lake on run
// those files for real). avxvnni_emulation_test builds both files a second
// time with this header forced in front (-include) and without -mavxvnni:
// every call of the intrinsic becomes EmulatedDpbusd, and the files'
// functions get names of their own (below), so that they link beside the
// real ones of medq_kernels. The test then holds them bitwise to the AVX2
// kernels, which is what dense_kernels.h promises of the real ones.
//
// vpdpbusd (Intel SDM, VPDPBUSD): for each 32-bit lane j, acc_j plus the four
// products of a's unsigned bytes 4j..4j+3 with b's signed bytes at the same
// places, summed in 32 bits, wrapping (not saturating). Here each byte is
// widened to 16 bits (a's by zero extension, b's by sign extension, even and
// odd bytes apart), so that vpmaddwd forms each pair's sum exactly (at most
// 2 · 255 · 128 in magnitude) and 32-bit adds wrap as vpdpbusd's do.
#pragma once

#include <immintrin.h>

namespace medq::engine::kernels::avxvnni_emulation {

// AVX2 code in any file, so that the test can call it after its CPU check.
[[gnu::target("avx2")]] inline __m256i EmulatedDpbusd(__m256i acc, __m256i a, __m256i b) {
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
  const __m256i a_even = _mm256_and_si256(a, low_bytes);
  const __m256i a_odd = _mm256_srli_epi16(a, 8);
  const __m256i b_even = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8);
  const __m256i b_odd = _mm256_srai_epi16(b, 8);
  const __m256i even = _mm256_madd_epi16(a_even, b_even);
  const __m256i odd = _mm256_madd_epi16(a_odd, b_odd);
  return _mm256_add_epi32(acc, _mm256_add_epi32(even, odd));
}

}  // namespace medq::engine::kernels::avxvnni_emulation

// After <immintrin.h>, whose own declaration keeps its name.
#define _mm256_dpbusd_avx_epi32 ::medq::engine::kernels::avxvnni_emulation::EmulatedDpbusd

// The emulated objects' functions, and dense_kernels.h's declarations of them
// in the files built with this header.
#define MatVecI4AvxVnni MatVecI4AvxVnniEmulated
#define MatRowsI4AvxVnni MatRowsI4AvxVnniEmulated
#define MatVecI8AvxVnni MatVecI8AvxVnniEmulated
#define MatRowsI8AvxVnni MatRowsI8AvxVnniEmulated
