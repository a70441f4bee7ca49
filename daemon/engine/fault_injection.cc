#include "daemon/engine/fault_injection.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace medq::engine {
namespace {

// One flag per Fault, indexed by its value.
std::atomic<bool> g_armed[static_cast<size_t>(Fault::kDecodeError) + 1];

std::atomic<bool>& Flag(Fault fault) {
  return g_armed[static_cast<size_t>(fault)];
}

thread_local int t_held_back = 0;

}  // namespace

FaultsHeldBack::FaultsHeldBack() {
  ++t_held_back;
}

FaultsHeldBack::~FaultsHeldBack() {
  --t_held_back;
}

void ArmFault(Fault fault) {
  Flag(fault) = true;
}

void FailIfArmed(Fault fault) {
  if (t_held_back > 0) return;
  if (Flag(fault).exchange(false)) {
    TORCH_CHECK(fault != Fault::kDecodeError,
                "CUDA error: an illegal memory access was encountered (injected by medqd "
                "--test-fault-injection)");
    TORCH_CHECK(false,
                "CUDA out of memory. Tried to allocate 2.00 GiB (injected by "
                "medqd --test-fault-injection)");
  }
}

}  // namespace medq::engine
