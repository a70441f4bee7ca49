// Runtime choice of the instruction set for medq_kernels' own kernels.
#pragma once

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

// True when this CPU (and the OS) supports AVX2 and FMA. Checked once, on the
// first call; thread-safe.
bool CpuSupportsAvx2Fma();

// The kernel table Linear() uses now: AVX2+FMA when the CPU supports it and
// SIMD has not been disabled with medq::engine::SetSimdKernelsEnabled(false)
// (linear.h), else scalar. Thread-safe.
const DenseKernels& ActiveKernels();

}  // namespace medq::engine::kernels
