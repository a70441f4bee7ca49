// The gated MLP's activation on raw buffers, for the CPU decode step
// (daemon/engine/decode_step.h).
#pragma once

#include <cstdint>

namespace medq::engine::kernels {

// out[j] = silu(gate[j]) · up[j] for j in [0, n), in float32, with the active
// kernel table (dense_kernels.h says how close the tables come to std::exp).
// out may alias neither input. Thread-safety: a pure function.
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace medq::engine::kernels
