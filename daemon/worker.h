// The worker thread: the only thread that runs LibTorch. It takes tasks from
// the Handoff one at a time; see handoff.h for the contract between threads.
#pragma once

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

  // `threads`: LibTorch intra-op threads, set once when the thread starts
  // (0: LibTorch's default).
  Worker(Handoff& handoff, int threads) : handoff_(handoff), threads_(threads) {}
  ~Worker();

  // Loop thread. Starts the thread, named "medq-worker".
  void Start();
  // Loop thread. Stops taking tasks after the queued ones and joins.
  void StopAndJoin();

  // Loop thread. Runs `work` on the worker, then `done` with its result on
  // the loop thread. An exception escaping `work` becomes INTERNAL.
  void Submit(Work work, Done done);

 private:
  void Run();

  Handoff& handoff_;
  int threads_;
  std::thread thread_;
};

}  // namespace medq::daemon
