// The worker thread: the only thread that runs LibTorch. It takes tasks from
// the Handoff one at a time; see handoff.h for the contract between threads.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/handoff.h"

namespace medq::daemon {

class Worker {
 public:
  using Work = std::function<Result<nlohmann::json>()>;
  using Done = std::function<void(Result<nlohmann::json>)>;

  // `threads`: CPU threads of the engine's kernels, set once when the thread
  // starts (0: one per core).
  Worker(Handoff& handoff, int threads) : handoff_(handoff), threads_(threads) {}
  ~Worker();

  // Loop thread. Starts the thread, named "medq-worker".
  void Start();
  // Loop thread. Stops taking tasks after the queued ones and joins.
  void StopAndJoin();

  // Loop thread. Runs `work` on the worker, then `done` with its result on
  // the loop thread. An exception escaping `work` becomes INTERNAL.
  void Submit(Work work, Done done);

  // Worker thread: runs `completion` on the loop thread (e.g. a token event
  // of a running task).
  void PostToLoop(Handoff::Closure completion) { handoff_.PostToLoop(std::move(completion)); }

  // Worker thread: "still making progress" from inside a long task (each
  // decode step calls it), for the watchdog.
  void Heartbeat();
  // Any thread: true when the worker is idle, or busy and has shown progress
  // within `max_silence`.
  bool Responsive(std::chrono::milliseconds max_silence) const;

 private:
  void Run();
  static int64_t NowMs();

  Handoff& handoff_;
  int threads_;
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> last_beat_ms_{0};
};

}  // namespace medq::daemon
