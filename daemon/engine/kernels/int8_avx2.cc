// AVX2+FMA kernels for int8 weights with one float32 scale per output row
// (the int8 entries of dense_kernels.h; the building blocks are in
// int8_rows.h). Built with -mavx2 -mfma like the other *_avx2.cc files,
// called only after the runtime check in cpu_features.cc; everything but the
// three entries has internal linkage.
#include "daemon/engine/kernels/int8_rows.h"

namespace medq::engine::kernels {

void MatVecI8Avx2(const int8_t* w, const float* scale, int64_t in, const float* x,
                  const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatVecI8Rows<DotsI8x8>(w, scale, in, x, bias, y, row_begin, row_end);
}

void MatRowsI8Avx2(const int8_t* w, const float* scale, int64_t in, int64_t out, const float* x,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  // Tiles of two x rows: four would need 16 accumulators, all of AVX2's
  // registers (int8_avx512.cc has twice as many).
  MatRowsI8Tiles<2>(w, scale, in, out, x, m, bias, y, row_begin, row_end);
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
