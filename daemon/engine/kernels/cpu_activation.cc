#include "daemon/engine/kernels/cpu_activation.h"

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  ActiveKernels().silu_mul_f32(gate, up, n, out);
}

}  // namespace medq::engine::kernels
