#include "daemon/engine/fault_injection.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace medq::engine {
namespace {

std::atomic<bool> g_load_oom{false};
std::atomic<bool> g_decode_oom{false};
std::atomic<bool> g_merge_oom{false};

std::atomic<bool>& Flag(Fault fault) {
  switch (fault) {
    case Fault::kLoadOom:
      return g_load_oom;
    case Fault::kDecodeOom:
      return g_decode_oom;
    case Fault::kMergeOom:
      break;
  }
  return g_merge_oom;
}

}  // namespace

void ArmFault(Fault fault) {
  Flag(fault) = true;
}

void FailIfArmed(Fault fault) {
  if (Flag(fault).exchange(false)) {
    TORCH_CHECK(false,
                "CUDA out of memory. Tried to allocate 2.00 GiB (injected by "
                "medqd --test-fault-injection)");
  }
}

}  // namespace medq::engine
