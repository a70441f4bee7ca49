// The AVX2 int4 products with AVX-VNNI's 256-bit vpdpbusd (Intel Alder Lake
// and later, AMD Zen 5), which many laptop CPUs without AVX-512 have: one
// instruction for the low or high nibbles of a quarter where AVX2 takes
// vpmaddubsw and an add (and vpmaddwd once a half span), for the same
// integers (int4_rows.h has the rest). Built with -mavx2 -mfma -mavxvnni,
// called only where cpu_features.cc found AVX-VNNI (dense_kernels_avx2.cc's
// tables choose).
#include "daemon/engine/kernels/int4_rows.h"

namespace medq::engine::kernels {
namespace {

struct AvxVnniDot {
  template <bool>
  static __m256i Quarter(__m256i part, __m256i lo, __m256i hi, const int8_t* q) {
    const auto* x = reinterpret_cast<const __m256i*>(q);
    part = _mm256_dpbusd_avx_epi32(part, lo, _mm256_loadu_si256(x));
    return _mm256_dpbusd_avx_epi32(part, hi, _mm256_loadu_si256(x + 2));
  }
  static __m256i Finish(__m256i part) { return part; }
};
using DotsI4AvxVnni = DotsI4YmmRows<AvxVnniDot>;

}  // namespace

void MatVecI4AvxVnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                     float* y, int64_t row_begin, int64_t row_end) {
  MatVecI4Rows<DotsI4AvxVnni>(w, params, x, bias, y, row_begin, row_end);
}

void MatRowsI4AvxVnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                      int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI4Tiles<DotsI4AvxVnni>(w, params, x, out, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
