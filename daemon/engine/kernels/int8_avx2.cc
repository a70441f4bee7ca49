// AVX2+FMA kernels for int8 weights with one float32 scale per output row
// (the int8 entries of dense_kernels.h; the product and the row loops are in
// int8_rows.h, x's preparation in prepare_x_avx2.cc). Built with -mavx2 -mfma
// like the other *_avx2.cc files, called only after the runtime check in
// cpu_features.cc; everything but the entries has internal linkage.
#include "daemon/engine/kernels/int8_rows.h"

namespace medq::engine::kernels {
namespace {

// AVX2's integer sums of DotsI8Ymm: the weight's sign onto x, its
// magnitude times x by vpmaddubsw, then vpmaddwd by ones.
struct MaddubsDotI8 {
  static __m256i Weights(__m256i v) { return _mm256_sign_epi8(v, v); }
  static __m256i Start(const int32_t*) { return _mm256_setzero_si256(); }
  static __m256i Add(__m256i p, __m256i u, __m256i v, __m256i xq) {
    const __m256i pairs = _mm256_maddubs_epi16(u, _mm256_sign_epi8(xq, v));
    return _mm256_add_epi32(p, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
using DotsI8Avx2 = DotsI8YmmRows<MaddubsDotI8>;

}  // namespace

void MatVecI8Avx2(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
                  int64_t row_begin, int64_t row_end) {
  MatVecI8Rows<DotsI8Avx2>(w, scale, x, bias, y, row_begin, row_end);
}

void MatRowsI8Avx2(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                   const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI8Tiles<DotsI8Avx2>(w, scale, x, out, m, bias, y, row_begin, row_end);
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
