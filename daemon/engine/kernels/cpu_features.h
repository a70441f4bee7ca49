// Runtime choice of the instruction set for medq_kernels' own kernels.
#pragma once

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

// True when this CPU (and the OS) supports AVX2 and FMA. Checked once, on the
// first call; thread-safe.
bool CpuSupportsAvx2Fma();

// True when this CPU (and the OS) supports AVX2, FMA, AVX-512F and AVX-512VL.
// Checked once, on the first call; thread-safe.
bool CpuSupportsAvx512Vl();

// True when CpuSupportsAvx512Vl() and the CPU has AVX-512BW and VNNI
// (vpdpbusd), which the AVX-512VL table's int4 and int8 products use where
// present. Checked once;
// thread-safe.
bool CpuSupportsAvx512Vnni();

// True when CpuSupportsAvx2Fma() and the CPU has AVX-VNNI (256-bit vpdpbusd
// without AVX-512), which the int4 and int8 products use where AVX-512 VNNI
// is missing. Checked once; thread-safe.
bool CpuSupportsAvxVnni();

// Whether the int4 products may take VNNI now: false only while the test
// switch (kernel_choice.h, SetVnniKernelsEnabled) holds it off.
bool VnniKernelsEnabled();

// The kernel table Linear() uses now: AVX-512VL when the CPU supports it, else
// AVX2+FMA when it supports that, else scalar; the test switches in
// kernel_choice.h (SetSimdKernelsEnabled, SetAvx512KernelsEnabled) take
// tables out of the choice. Thread-safe.
const DenseKernels& ActiveKernels();

}  // namespace medq::engine::kernels
