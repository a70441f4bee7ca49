// AVX2+FMA dense kernels. This file and dense_kernels_rows_avx2.cc (and, with
// AVX-512 too, dense_kernels_rows_avx512.cc) are the only files of the
// project compiled with -mavx2 -mfma (see CMakeLists.txt); nothing here may
// run before the runtime check in cpu_features.cc has said yes. Everything here has internal
// linkage but the table, and no standard-library template is used: a weak out-of-line copy of one,
// compiled with AVX2, could be chosen by the linker for the whole program.
#include <immintrin.h>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// Four weight rows against one x: the x vector is loaded once per step for
// four rows, and eight independent accumulators hide the FMA latency.
template <typename T>
inline void Dot4(const T* w, int64_t in, const float* x, float out[4]) {
  const T* w0 = w;
  const T* w1 = w + in;
  const T* w2 = w + 2 * in;
  const T* w3 = w + 3 * in;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  __m256 b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    const __m256 xa = _mm256_loadu_ps(x + k);
    const __m256 xb = _mm256_loadu_ps(x + k + 8);
    a0 = _mm256_fmadd_ps(Load8(w0 + k), xa, a0);
    a1 = _mm256_fmadd_ps(Load8(w1 + k), xa, a1);
    a2 = _mm256_fmadd_ps(Load8(w2 + k), xa, a2);
    a3 = _mm256_fmadd_ps(Load8(w3 + k), xa, a3);
    b0 = _mm256_fmadd_ps(Load8(w0 + k + 8), xb, b0);
    b1 = _mm256_fmadd_ps(Load8(w1 + k + 8), xb, b1);
    b2 = _mm256_fmadd_ps(Load8(w2 + k + 8), xb, b2);
    b3 = _mm256_fmadd_ps(Load8(w3 + k + 8), xb, b3);
  }
  if (k + 8 <= in) {
    const __m256 xa = _mm256_loadu_ps(x + k);
    a0 = _mm256_fmadd_ps(Load8(w0 + k), xa, a0);
    a1 = _mm256_fmadd_ps(Load8(w1 + k), xa, a1);
    a2 = _mm256_fmadd_ps(Load8(w2 + k), xa, a2);
    a3 = _mm256_fmadd_ps(Load8(w3 + k), xa, a3);
    k += 8;
  }
  out[0] = HorizontalSum(_mm256_add_ps(a0, b0));
  out[1] = HorizontalSum(_mm256_add_ps(a1, b1));
  out[2] = HorizontalSum(_mm256_add_ps(a2, b2));
  out[3] = HorizontalSum(_mm256_add_ps(a3, b3));
  for (; k < in; ++k) {
    out[0] += Scalar(w0[k]) * x[k];
    out[1] += Scalar(w1[k]) * x[k];
    out[2] += Scalar(w2[k]) * x[k];
    out[3] += Scalar(w3[k]) * x[k];
  }
}

// One weight row: a single sequential stream, which the hardware prefetcher
// follows best (four interleaved short rows measured slower). Four
// accumulators hide the FMA latency. Stream: the row comes from memory (the
// matvec), so the weights kStreamPrefetchBytes on are asked for as it goes;
// the result is the same either way.
template <bool Stream = false, typename T>
inline float Dot1(const T* w, int64_t in, const float* x) {
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
  __m256 c = _mm256_setzero_ps(), d = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (Stream) PrefetchStreamBlock(w + k);
    a = _mm256_fmadd_ps(Load8(w + k), _mm256_loadu_ps(x + k), a);
    b = _mm256_fmadd_ps(Load8(w + k + 8), _mm256_loadu_ps(x + k + 8), b);
    c = _mm256_fmadd_ps(Load8(w + k + 16), _mm256_loadu_ps(x + k + 16), c);
    d = _mm256_fmadd_ps(Load8(w + k + 24), _mm256_loadu_ps(x + k + 24), d);
  }
  for (; k + 8 <= in; k += 8) {
    a = _mm256_fmadd_ps(Load8(w + k), _mm256_loadu_ps(x + k), a);
  }
  return AddTail(HorizontalSum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d))), w, x, k,
                 in);
}

void MatVecF32(const float* w, int64_t in, const float* x, const float* bias, float* y,
               int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float dot = Dot1<true>(w + r * in, in, x);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void PrepareBf16Rows(const float* x, int64_t m, int64_t in, float* split) {
  for (int64_t i = 0; i < m; ++i)
    PrepareBf16X(x + i * in, in, split + i * in);
}

// One bf16 weight row against x split by PrepareBf16X: the AVX-512VL table's
// matvec, whose matrows tiles keep its four sums (the AVX2 table's,
// MatVecBf16Avx2, keeps two: dense_kernels_rows_avx2.cc). A 32-bit lane j of
// 16 loaded bf16 values holds element 2j in its low half and 2j+1 in its
// high half, so a shift gives the even elements as float32 and a mask the
// odd ones: one load and two integer ops per 16 weights, where widening each
// 8 needs a cross-lane shuffle (the bottleneck of Load8 at ~12 GB/s a core).
inline float SplitDotBf16(const uint16_t* w, int64_t in, const float* split) {
  const __m256i high = _mm256_set1_epi32(kBf16HighHalf);
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
  __m256 c = _mm256_setzero_ps(), d = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    PrefetchStreamBlock(w + k);
    const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k + 16));
    a = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(r0, 16)), _mm256_loadu_ps(split + k),
                        a);
    b = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(r0, high)),
                        _mm256_loadu_ps(split + k + 8), b);
    c = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(r1, 16)),
                        _mm256_loadu_ps(split + k + 16), c);
    d = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(r1, high)),
                        _mm256_loadu_ps(split + k + 24), d);
  }
  if (k + 16 <= in) {
    const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + k));
    a = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(r0, 16)), _mm256_loadu_ps(split + k),
                        a);
    b = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(r0, high)),
                        _mm256_loadu_ps(split + k + 8), b);
    k += 16;
  }
  return AddTail(HorizontalSum(_mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d))), w, split,
                 k, in);
}

void MatVecBf16(const uint16_t* w, int64_t in, const float* x, const float* bias, float* y,
                int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float dot = SplitDotBf16(w + r * in, in, x);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

// Four float32 weight rows against two x rows: each loaded weight vector
// feeds two FMAs, which halves the cache traffic per FMA of Dot4.
// out[i * 4 + j] = dot(w row j, x row i).
inline void Dot4x2(const float* w, int64_t in, const float* x0, const float* x1, float out[8]) {
  const float* w0 = w;
  const float* w1 = w + in;
  const float* w2 = w + 2 * in;
  const float* w3 = w + 3 * in;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
  __m256 b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= in; k += 8) {
    const __m256 xa = _mm256_loadu_ps(x0 + k);
    const __m256 xb = _mm256_loadu_ps(x1 + k);
    const __m256 v0 = _mm256_loadu_ps(w0 + k);
    const __m256 v1 = _mm256_loadu_ps(w1 + k);
    const __m256 v2 = _mm256_loadu_ps(w2 + k);
    const __m256 v3 = _mm256_loadu_ps(w3 + k);
    a0 = _mm256_fmadd_ps(v0, xa, a0);
    a1 = _mm256_fmadd_ps(v1, xa, a1);
    a2 = _mm256_fmadd_ps(v2, xa, a2);
    a3 = _mm256_fmadd_ps(v3, xa, a3);
    b0 = _mm256_fmadd_ps(v0, xb, b0);
    b1 = _mm256_fmadd_ps(v1, xb, b1);
    b2 = _mm256_fmadd_ps(v2, xb, b2);
    b3 = _mm256_fmadd_ps(v3, xb, b3);
  }
  out[0] = HorizontalSum(a0);
  out[1] = HorizontalSum(a1);
  out[2] = HorizontalSum(a2);
  out[3] = HorizontalSum(a3);
  out[4] = HorizontalSum(b0);
  out[5] = HorizontalSum(b1);
  out[6] = HorizontalSum(b2);
  out[7] = HorizontalSum(b3);
  for (; k < in; ++k) {
    out[0] += w0[k] * x0[k];
    out[1] += w1[k] * x0[k];
    out[2] += w2[k] * x0[k];
    out[3] += w3[k] * x0[k];
    out[4] += w0[k] * x1[k];
    out[5] += w1[k] * x1[k];
    out[6] += w2[k] * x1[k];
    out[7] += w3[k] * x1[k];
  }
}

// Converts one block of bf16 weight rows to float32 (it stays in L1/L2), then
// runs every input row against it: the weights cross the memory bus once.
void MatMulBf16(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                const float* bias, float* y, int64_t row_begin, int64_t row_end, float* block) {
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kBf16RowBlock) {
    const int64_t rows = r0 + kBf16RowBlock <= row_end ? kBf16RowBlock : row_end - r0;
    const uint16_t* src = w + r0 * in;
    const int64_t n = rows * in;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(block + j, Load8(src + j));
    for (; j < n; ++j)
      block[j] = Scalar(src[j]);
    int64_t i = 0;
    if (rows == kBf16RowBlock) {
      for (; i + 2 <= m; i += 2) {
        float dots[8];
        Dot4x2(block, in, x + i * in, x + (i + 1) * in, dots);
        for (int64_t q = 0; q < 4; ++q) {
          y[i * out + r0 + q] = dots[q];
          y[(i + 1) * out + r0 + q] = dots[4 + q];
        }
      }
    }
    for (; i < m; ++i) {
      float* yi = y + i * out + r0;
      const float* xi = x + i * in;
      if (rows == kBf16RowBlock) {
        float dots[4];
        Dot4(block, in, xi, dots);
        for (int64_t q = 0; q < 4; ++q)
          yi[q] = dots[q];
      } else {
        for (int64_t q = 0; q < rows; ++q)
          yi[q] = Dot1(block + q * in, in, xi);
      }
    }
    if (bias != nullptr) {
      for (int64_t i2 = 0; i2 < m; ++i2) {
        for (int64_t q = 0; q < rows; ++q)
          y[i2 * out + r0 + q] += bias[r0 + q];
      }
    }
  }
}

void ConvertBf16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, Load8(src + i));
  for (; i < n; ++i)
    dst[i] = Scalar(src[i]);
}

// Columns [i, i + 8 * K) of y = p · w, K vectors of accumulators kept in
// registers over every row of w.
template <int K>
inline void VecMatColumns(const float* p, const float* w, int64_t n, int64_t d, int64_t i,
                          float* y) {
  __m256 acc[K];
  for (int k = 0; k < K; ++k)
    acc[k] = _mm256_setzero_ps();
  for (int64_t s = 0; s < n; ++s) {
    const __m256 ps = _mm256_broadcast_ss(p + s);
    const float* row = w + s * d + i;
    for (int k = 0; k < K; ++k)
      acc[k] = _mm256_fmadd_ps(ps, _mm256_loadu_ps(row + 8 * k), acc[k]);
  }
  for (int k = 0; k < K; ++k)
    _mm256_storeu_ps(y + i + 8 * k, acc[k]);
}

// Blocks of 64 columns (eight accumulators: enough independent FMAs to hide
// their latency; a head of 64 or 128 reads each row in one or two passes),
// then of 8, then one column at a time.
void VecMatF32(const float* p, const float* w, int64_t n, int64_t d, float* y) {
  int64_t i = 0;
  for (; i + 64 <= d; i += 64)
    VecMatColumns<8>(p, w, n, d, i, y);
  for (; i + 8 <= d; i += 8)
    VecMatColumns<1>(p, w, n, d, i, y);
  for (; i < d; ++i) {
    __m128 acc = _mm_setzero_ps();
    for (int64_t s = 0; s < n; ++s)
      acc = _mm_fmadd_ss(_mm_set_ss(p[s]), _mm_set_ss(w[s * d + i]), acc);
    y[i] = _mm_cvtss_f32(acc);
  }
}

// The tables' int4 and int8 products: AVX-512 VNNI's (the AVX-512VL table
// only) or AVX-VNNI's where the CPU has them, else AVX2's vpmaddubsw: the
// same bits whichever runs.
enum class Vnni { kNone, kAvx, kAvx512 };
template <bool kAvx512>
Vnni VnniNow() {
  if (!VnniKernelsEnabled()) return Vnni::kNone;
  if (kAvx512 && CpuSupportsAvx512Vnni()) return Vnni::kAvx512;
  return CpuSupportsAvxVnni() ? Vnni::kAvx : Vnni::kNone;
}

// A table entry of type Fn that runs kOnAvx512Vnni, kOnAvxVnni or kOnAvx2 as
// VnniNow<kAvx512>() says.
template <typename Fn, bool kAvx512, Fn kOnAvx512Vnni, Fn kOnAvxVnni, Fn kOnAvx2>
struct Best;
template <typename... Args, bool kAvx512, void (*kOnAvx512Vnni)(Args...),
          void (*kOnAvxVnni)(Args...), void (*kOnAvx2)(Args...)>
struct Best<void (*)(Args...), kAvx512, kOnAvx512Vnni, kOnAvxVnni, kOnAvx2> {
  static void Run(Args... args) {
    switch (VnniNow<kAvx512>()) {
      case Vnni::kAvx512:
        return kOnAvx512Vnni(args...);
      case Vnni::kAvx:
        return kOnAvxVnni(args...);
      case Vnni::kNone:
        break;
    }
    kOnAvx2(args...);
  }
};

template <bool kAvx512>
constexpr MatVecI4Fn kMatVecI4 =
    &Best<MatVecI4Fn, kAvx512, &MatVecI4Vnni, &MatVecI4AvxVnni, &MatVecI4Avx2>::Run;
template <bool kAvx512>
constexpr MatRowsI4Fn kMatRowsI4 =
    &Best<MatRowsI4Fn, kAvx512, &MatRowsI4Vnni, &MatRowsI4AvxVnni, &MatRowsI4Avx2>::Run;
template <bool kAvx512>
constexpr MatVecI8Fn kMatVecI8 =
    &Best<MatVecI8Fn, kAvx512, &MatVecI8Vnni, &MatVecI8AvxVnni, &MatVecI8Avx2>::Run;
template <bool kAvx512>
constexpr MatRowsI8Fn kMatRowsI8 =
    &Best<MatRowsI8Fn, kAvx512, &MatRowsI8Vnni, &MatRowsI8AvxVnni, &MatRowsI8Avx2>::Run;

}  // namespace

const DenseKernels& Avx2FmaKernels() {
  static constexpr DenseKernels kTable{"avx2_fma",       &MatVecF32Avx2,      &MatVecBf16Avx2,
                                       &PrepareBf16Rows, &MatMulBf16,         &ConvertBf16,
                                       &MatRowsF32Avx2,  &MatRowsBf16Avx2,    &PackedBf16Avx2,
                                       &VecMatF32,       &SiluMulAvx2,        &ScoresF32Avx2,
                                       &SoftmaxF32Avx2,  &QuantizeXBlockAvx2, &QuantizeXSpanAvx2,
                                       kMatVecI8<false>, kMatRowsI8<false>,   &DequantizeI8Avx2,
                                       kMatVecI4<false>, kMatRowsI4<false>,   &DequantizeI4Avx2};
  return kTable;
}

const DenseKernels& Avx512VlKernels() {
  static constexpr DenseKernels kTable{
      "avx512vl",       &MatVecF32,          &MatVecBf16,        &PrepareBf16RowsAvx512,
      &MatMulBf16,      &ConvertBf16,        &MatRowsF32Avx512,  &MatRowsBf16Avx512,
      &PackedBf16Avx2,  &VecMatF32,          &SiluMulAvx2,       &ScoresF32Avx2,
      &SoftmaxF32Avx2,  &QuantizeXBlockAvx2, &QuantizeXSpanAvx2, kMatVecI8<true>,
      kMatRowsI8<true>, &DequantizeI8Avx2,   kMatVecI4<true>,    kMatRowsI4<true>,
      &DequantizeI4Avx2};
  return kTable;
}

}  // namespace medq::engine::kernels
