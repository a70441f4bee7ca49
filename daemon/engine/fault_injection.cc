#include "daemon/engine/fault_injection.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace medq::engine {
namespace {

std::atomic<bool> g_load_oom{false};
std::atomic<bool> g_decode_oom{false};

std::atomic<bool>& Flag(Fault fault) {
  return fault == Fault::kLoadOom ? g_load_oom : g_decode_oom;
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
