// The worker thread, "medq-worker": the only thread that runs LibTorch. It
// owns the loaded models and the running generations, and loops over steps:
// it takes the tasks the loop has posted (starting a generation, a model op,
// a cleanup), runs them in order, then advances every running generation by
// one step (worker/generations.h), and sleeps only when nothing runs. A task
// therefore waits at most one step, and a generation at most the tasks
// posted before its next step. See handoff.h for the contract between the
// threads; the loop's side of it is loop/scheduler.h.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "daemon/handoff.h"
#include "daemon/worker/generations.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

struct WorkerOptions {
  int threads = 0;  // CPU threads of the engine's kernels (0: one per core)
  LoadPolicy load;
  GenerationPolicy generation;
};

class Worker {
 public:
  Worker(Handoff& handoff, WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Loop thread. Starts the thread.
  void Start();
  // Loop thread. Stops after the queued tasks and the running generations
  // (cancel them first to stop soon), and joins.
  void StopAndJoin();

  // Worker thread: what tasks work with.
  ModelStore& models() { return models_; }
  Generations& generations() { return generations_; }

  // Any thread: true when the worker is idle, or busy and has shown progress
  // (a task or a step ended) within `max_silence`.
  bool Responsive(std::chrono::milliseconds max_silence) const;

 private:
  void Run();
  void Heartbeat();
  static int64_t NowMs();

  Handoff& handoff_;
  int threads_;
  ModelStore models_;
  Generations generations_;
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> last_beat_ms_{0};
};

}  // namespace medq::daemon
