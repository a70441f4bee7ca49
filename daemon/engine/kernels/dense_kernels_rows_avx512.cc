// The AVX-512VL table's matrows kernels (dense_kernels_rows.h: tiles of two
// weight rows and two x rows, whose 16 accumulators need the 32 vector
// registers AVX-512VL gives 256-bit instructions), built with -mavx2 -mfma
// -mavx512f -mavx512vl. The vectors stay 256 bits wide, and every result is
// bitwise the AVX2 one-row kernel's (the matvec both tables share).
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

namespace medq::engine::kernels {

void MatRowsF32Avx512(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                      const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsPaired(w, in, out, x, m, bias, y, row_begin, row_end);
}

void MatRowsBf16Avx512(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                       const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsPaired(w, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
