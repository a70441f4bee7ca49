// The AVX-512VL table's matrows_i8: int8_rows.h's tiles of four x rows,
// whose 16 accumulators fit AVX-512VL's 32 vector registers (ymm16-31) with
// the widened weights beside them; the same operations as the AVX2 kernels,
// so the same bits. Built with -mavx2 -mfma -mavx512f -mavx512vl, called only
// where cpu_features.cc found AVX-512VL.
#include "daemon/engine/kernels/int8_rows.h"

namespace medq::engine::kernels {

void MatRowsI8Avx512(const int8_t* w, const float* scale, int64_t in, int64_t out, const float* x,
                     int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsI8Tiles<4>(w, scale, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
