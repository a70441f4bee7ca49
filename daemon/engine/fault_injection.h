// Test-only fault injection: makes the next model load, adapter merge or
// decode step fail exactly as a CUDA out-of-memory error would, or the next
// decode step as a broken device would (an illegal memory access), so that
// machines without a GPU exercise the daemon's recovery paths. The daemon
// arms faults only when started with --test-fault-injection.
#pragma once

namespace medq::engine {

enum class Fault {
  kLoadOom,      // the next LoadModel fails with GPU_OOM
  kDecodeOom,    // the next decode step of a generation fails with GPU_OOM
  kMergeOom,     // the next LoRA adapter merge fails with GPU_OOM
  kDecodeError,  // the next decode step fails as a device error: INTERNAL (the last: see Flag())
};

// Any thread. Arms `fault` for the next time it can happen; arming twice is
// the same as once.
void ArmFault(Fault fault);

// Engine internals, worker thread: throws a CUDA-style c10::Error (out of
// memory, or for kDecodeError an illegal memory access) and disarms when
// `fault` is armed, unless a FaultsHeldBack is alive.
void FailIfArmed(Fault fault);

// Worker thread: while alive, armed faults stay armed and fire for nobody,
// so that the engine's own work (the warm-up at load) does not take the
// fault a test armed for a request.
class FaultsHeldBack {
 public:
  FaultsHeldBack();
  ~FaultsHeldBack();
  FaultsHeldBack(const FaultsHeldBack&) = delete;
  FaultsHeldBack& operator=(const FaultsHeldBack&) = delete;
};

}  // namespace medq::engine
