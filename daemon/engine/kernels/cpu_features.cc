#include "daemon/engine/kernels/cpu_features.h"

#include <atomic>

#include "daemon/engine/kernels/kernel_choice.h"

namespace medq::engine::kernels {
namespace {

// Read by ActiveKernels(), written by the test switches in kernel_choice.h.
std::atomic<bool> g_simd_enabled{true};
std::atomic<bool> g_avx512_enabled{true};
std::atomic<bool> g_vnni_enabled{true};

bool DetectAvx2Fma() {
#if MEDQ_KERNELS_HAVE_AVX2
  // GCC and Clang check the OS's XSAVE support for the YMM state too.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool DetectAvx512Vl() {
#if MEDQ_KERNELS_HAVE_AVX2
  __builtin_cpu_init();
  return DetectAvx2Fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
  return false;
#endif
}

bool DetectAvx512Vnni() {
#if MEDQ_KERNELS_HAVE_AVX2
  __builtin_cpu_init();
  return DetectAvx512Vl() && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool DetectAvxVnni() {
#if MEDQ_KERNELS_HAVE_AVX2
  __builtin_cpu_init();
  return DetectAvx2Fma() && __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}

}  // namespace

bool CpuSupportsAvx2Fma() {
  static const bool supported = DetectAvx2Fma();
  return supported;
}

bool CpuSupportsAvx512Vl() {
  static const bool supported = DetectAvx512Vl();
  return supported;
}

bool CpuSupportsAvx512Vnni() {
  static const bool supported = DetectAvx512Vnni();
  return supported;
}

bool CpuSupportsAvxVnni() {
  static const bool supported = DetectAvxVnni();
  return supported;
}

bool VnniKernelsEnabled() {
  return g_vnni_enabled.load(std::memory_order_relaxed);
}

const DenseKernels& ActiveKernels() {
#if MEDQ_KERNELS_HAVE_AVX2
  if (g_simd_enabled.load(std::memory_order_relaxed)) {
    if (g_avx512_enabled.load(std::memory_order_relaxed) && CpuSupportsAvx512Vl()) {
      return Avx512VlKernels();
    }
    if (CpuSupportsAvx2Fma()) return Avx2FmaKernels();
  }
#endif
  return ScalarKernels();
}

}  // namespace medq::engine::kernels

namespace medq::engine {

void SetSimdKernelsEnabled(bool enabled) {
  kernels::g_simd_enabled.store(enabled, std::memory_order_relaxed);
}

void SetAvx512KernelsEnabled(bool enabled) {
  kernels::g_avx512_enabled.store(enabled, std::memory_order_relaxed);
}

void SetVnniKernelsEnabled(bool enabled) {
  kernels::g_vnni_enabled.store(enabled, std::memory_order_relaxed);
}

const char* ActiveKernelsName() {
  return kernels::ActiveKernels().name;
}

}  // namespace medq::engine
