// Which instruction set Linear()'s own kernels use, and the switches that
// narrow the runtime choice for tests and benchmarks. Free of LibTorch, so
// that a benchmark can name the kernels without LibTorch's headers.
#pragma once

namespace medq::engine {

// The instruction set of Linear()'s own kernels now: "avx512vl", "avx2_fma"
// or "scalar".
const char* ActiveKernelsName();

// Test and benchmark switch: false forces the portable scalar kernels, true
// (the default) restores the runtime CPU choice (the best table the CPU
// supports: cpu_features.h).
// Process-wide; call it only while no Linear() call is running. Production
// code never calls it.
void SetSimdKernelsEnabled(bool enabled);

// Test and benchmark switch: false leaves the AVX-512VL table out of the
// runtime choice (AVX2+FMA is used where supported), true (the default) puts
// it back. Same rules as SetSimdKernelsEnabled.
void SetAvx512KernelsEnabled(bool enabled);

// Test and benchmark switch: false keeps the int4 products off VNNI
// (AVX-512's and AVX-VNNI's vpdpbusd), on AVX2's vpmaddubsw instead, which
// gives the same bits; true (the default) lets the CPU choose. Same rules as
// SetSimdKernelsEnabled.
void SetVnniKernelsEnabled(bool enabled);

}  // namespace medq::engine
