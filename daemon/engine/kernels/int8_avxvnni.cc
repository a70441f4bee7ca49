// The AVX2 int8 products with AVX-VNNI's 256-bit vpdpbusd (as
// int4_avxvnni.cc for int4): one instruction where AVX2 takes vpmaddubsw
// and vpmaddwd, the same integers (int8_rows.h has the rest). Built with
// -mavx2 -mfma -mavxvnni, called only where cpu_features.cc found AVX-VNNI
// (dense_kernels_avx2.cc's tables choose).
#include "daemon/engine/kernels/int8_rows.h"

namespace medq::engine::kernels {
namespace {

struct AvxVnniDotI8 {
  static __m256i Sum(__m256i u, __m256i s) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
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
