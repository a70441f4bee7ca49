// AVX2+FMA kernels for int8 weights with one float32 scale per output row
// (the int8 entries of dense_kernels.h). Built with -mavx2 -mfma like the
// other *_avx2.cc files, called only after the runtime check in
// cpu_features.cc; everything but the three entries has internal linkage.
//
// Each weight row is widened eight at a time (sign extension to 32 bits, then
// to float32, both exact) and multiplied into four accumulators, in the order
// the scalar table's DotI8 spells out, so the results are its bits. A tile of
// two x rows shares each widened weight vector: the widening, not the FMA, is
// the costly part of a product, and with two x rows it is paid once for both.
// A row's sums never depend on the tile it ran in (batch invariance).
#include <immintrin.h>

#include "daemon/engine/kernels/avx2_common.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// Eight int8 weights at w as float32.
inline __m256 WidenI8(const int8_t* w) {
  const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw));
}

// dots[i] = DotI8(w, x row i) for the M x rows at x (row stride in).
// Stream: the first pass over a row (from memory) prefetches ahead into L2;
// the later ones find the row in L1.
template <int M, bool kStream>
inline void DotsI8(const int8_t* w, int64_t in, const float* x, float* dots) {
  __m256 a[M], b[M], c[M], d[M];
  for (int i = 0; i < M; ++i) {
    a[i] = _mm256_setzero_ps();
    b[i] = _mm256_setzero_ps();
    c[i] = _mm256_setzero_ps();
    d[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kStream) PrefetchStreamBlock(w + k);
    const __m256 w0 = WidenI8(w + k);
    const __m256 w1 = WidenI8(w + k + 8);
    const __m256 w2 = WidenI8(w + k + 16);
    const __m256 w3 = WidenI8(w + k + 24);
    for (int i = 0; i < M; ++i) {
      const float* xi = x + i * in + k;
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xi), a[i]);
      b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xi + 8), b[i]);
      c[i] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xi + 16), c[i]);
      d[i] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xi + 24), d[i]);
    }
  }
  for (; k + 8 <= in; k += 8) {
    const __m256 w0 = WidenI8(w + k);
    for (int i = 0; i < M; ++i)
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), a[i]);
  }
  for (int i = 0; i < M; ++i) {
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[i], b[i]), _mm256_add_ps(c[i], d[i]));
    dots[i] = AddTail(HorizontalSum(sum), w, x + i * in, k, in);
  }
}

// y = fma(dot, scale, bias), or dot · scale: spelled out so that the compiler
// neither fuses nor splits it differently from the scalar table.
inline float ScaleI8(float dot, const float* scale, const float* bias, int64_t r) {
  if (bias == nullptr) return _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(dot), _mm_set_ss(scale[r])));
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(dot), _mm_set_ss(scale[r]), _mm_set_ss(bias[r])));
}

}  // namespace

void MatVecI8Avx2(const int8_t* w, const float* scale, int64_t in, const float* x,
                  const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    DotsI8<1, true>(w + r * in, in, x, &dot);
    y[r] = ScaleI8(dot, scale, bias, r);
  }
}

void MatRowsI8Avx2(const int8_t* w, const float* scale, int64_t in, int64_t out, const float* x,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int8_t* wr = w + r * in;
    float dots[2];
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) {
      if (i == 0) {
        DotsI8<2, true>(wr, in, x, dots);
      } else {
        DotsI8<2, false>(wr, in, x + i * in, dots);
      }
      y[i * out + r] = ScaleI8(dots[0], scale, bias, r);
      y[(i + 1) * out + r] = ScaleI8(dots[1], scale, bias, r);
    }
    if (i < m) {
      if (i == 0) {
        DotsI8<1, true>(wr, in, x, dots);
      } else {
        DotsI8<1, false>(wr, in, x + i * in, dots);
      }
      y[i * out + r] = ScaleI8(dots[0], scale, bias, r);
    }
  }
}

void DequantizeI8Avx2(const int8_t* q, const float* scale, int64_t rows, int64_t in, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const int8_t* qr = q + r * in;
    float* dr = dst + r * in;
    const __m256 s = _mm256_set1_ps(scale[r]);
    int64_t k = 0;
    for (; k + 8 <= in; k += 8)
      _mm256_storeu_ps(dr + k, _mm256_mul_ps(WidenI8(qr + k), s));
    for (; k < in; ++k)
      dr[k] = _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(Scalar(qr[k])), _mm_set_ss(scale[r])));
  }
}

}  // namespace medq::engine::kernels
