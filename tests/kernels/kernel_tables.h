// Test helper: runs a test's body on one kernel table (kernel_choice.h),
// restoring the runtime choice after, and names the table each choice runs.
#pragma once

#include <string>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/kernel_choice.h"
#include "tests/support/skip.h"

namespace medq::engine {

// Which kernel tables the runtime choice may take, for one test's lifetime.
enum class Tables { kAvx512, kAvx2, kScalar };

// The table each choice runs on a CPU that has it (kAvx512: the
// two-weight-row tiles). A test compares it with ActiveKernelsName() and is
// skipped where they differ: another table would run.
inline const char* TableName(Tables t) {
  switch (t) {
    case Tables::kAvx512:
      return "avx512vl";
    case Tables::kAvx2:
      return "avx2_fma";
    case Tables::kScalar:
      break;
  }
  return "scalar";
}

class KernelMode {
 public:
  explicit KernelMode(Tables t) {
    SetSimdKernelsEnabled(t != Tables::kScalar);
    SetAvx512KernelsEnabled(t == Tables::kAvx512);
  }
  ~KernelMode() {
    SetSimdKernelsEnabled(true);
    SetAvx512KernelsEnabled(true);
  }
  KernelMode(const KernelMode&) = delete;
  KernelMode& operator=(const KernelMode&) = delete;
};

// Keeps the int4 products off VNNI (AVX2's vpmaddubsw instead) for its
// lifetime, or lets the CPU choose (vnni true, the default).
class VnniMode {
 public:
  explicit VnniMode(bool vnni) { SetVnniKernelsEnabled(vnni); }
  ~VnniMode() { SetVnniKernelsEnabled(true); }
  VnniMode(const VnniMode&) = delete;
  VnniMode& operator=(const VnniMode&) = delete;
};

}  // namespace medq::engine

// Ends the calling test function as skipped when the table `tables` names
// would not run on this CPU (another table would). For use right after a
// KernelMode for the same tables.
#define MEDQ_SKIP_UNLESS_TABLE(tables)                                                     \
  do {                                                                                     \
    const std::string medq_active_ = ::medq::engine::ActiveKernelsName();                  \
    if (medq_active_ != ::medq::engine::TableName(tables)) {                               \
      MEDQ_SKIP("this CPU lacks the " << ::medq::engine::TableName(tables) << " kernels (" \
                                      << medq_active_ << " would run)");                   \
    }                                                                                      \
  } while (false)

// Ends the calling test as skipped when `vnni` asks for the table's VNNI
// products (int4, int8) and this CPU has none (AVX2's would run, which the
// case with vnni false checks).
#define MEDQ_SKIP_UNLESS_VNNI(tables, vnni)                                            \
  do {                                                                                 \
    const bool medq_has_ = (tables) == ::medq::engine::Tables::kAvx512                 \
                               ? ::medq::engine::kernels::CpuSupportsAvx512Vnni() ||   \
                                     ::medq::engine::kernels::CpuSupportsAvxVnni()     \
                               : ::medq::engine::kernels::CpuSupportsAvxVnni();        \
    if ((vnni) && !medq_has_)                                                          \
      MEDQ_SKIP("this CPU has no VNNI for the " << ::medq::engine::TableName(tables)); \
  } while (false)
