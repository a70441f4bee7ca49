// The AVX2 int8 products with AVX-VNNI's 256-bit vpdpbusd (as
// int4_avxvnni.cc for int4): the weights offset by 128 (one vpxor, shared
// by the rows) are the unsigned side, and a lane's sum starts from -128 · Σ
// x (PrepareI8Rows' offset), so that one instruction a row takes the place
// of AVX2's vpsignb, vpmaddubsw, vpmaddwd and add, for the same integers
// (int8_rows.h has the rest). Built with
// -mavx2 -mfma -mavxvnni, called only where cpu_features.cc found AVX-VNNI
// (dense_kernels_avx2.cc's tables choose).
#include "daemon/engine/kernels/int8_rows.h"

namespace medq::engine::kernels {
namespace {

struct AvxVnniDotI8 {
  static __m256i Weights(__m256i v) { return _mm256_xor_si256(v, _mm256_set1_epi8(-128)); }
  static __m256i Start(const int32_t* offset) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset));
  }
  static __m256i Add(__m256i p, __m256i u, __m256i, __m256i xq) {
    return _mm256_dpbusd_avx_epi32(p, u, xq);
  }
};
using DotsI8AvxVnni = DotsI8YmmRows<AvxVnniDotI8>;

}  // namespace

void MatVecI8AvxVnni(const int8_t* w, const float* scale, const I8Rows& x, const float* bias,
                     float* y, int64_t row_begin, int64_t row_end) {
  MatVecI8Rows<DotsI8AvxVnni>(w, scale, x, bias, y, row_begin, row_end);
}

void MatRowsI8AvxVnni(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                      const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI8Tiles<DotsI8AvxVnni>(w, scale, x, out, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
