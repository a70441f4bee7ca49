// The AVX2+FMA table's matrows kernels (dense_kernels_rows.h: tiles of one
// weight row and two x rows), built with -mavx2 -mfma like
// dense_kernels_avx2.cc.
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

namespace medq::engine::kernels {

void MatRowsF32Avx2(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRows(w, in, out, x, m, bias, y, row_begin, row_end);
}

void MatRowsBf16Avx2(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRows(w, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
