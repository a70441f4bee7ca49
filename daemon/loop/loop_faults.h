// Test-only faults on the loop thread (medqd --test-fault-injection). The
// engine's faults (engine/fault_injection.h) make work fail on the worker;
// this one makes a task's completion throw on the loop, where nothing thrown
// may reach libuv: the Scheduler's guard around completions catches it, the
// job's Responder answers INTERNAL as it is dropped, and the daemon goes on.
// Owned by DaemonState; loop thread only.
#pragma once

#include <string_view>

namespace medq::daemon {

class LoopFaults {
 public:
  // Arms a throw in the next completion that checks (cleanup-memory and the
  // model-class ops: load, unload, tokenize, detokenize, apply-template).
  // Arming twice is the same as once.
  void ArmCompletionThrow() { completion_throw_ = true; }

  // At the start of such a completion: when armed, disarms and throws
  // std::runtime_error naming `op`; otherwise does nothing.
  void ThrowIfCompletionArmed(std::string_view op);

 private:
  bool completion_throw_ = false;
};

}  // namespace medq::daemon
