// The worker thread, "medq-worker": the only thread that runs LibTorch. It
// owns the loaded models, the running generations and the embedding batcher,
// and loops over steps: it takes the tasks the loop has posted (starting a
// generation or an embed request, a model op, a cleanup), runs them in
// order, advances every running generation by one step
// (worker/generations.h), then runs an embedding batch when one is due
// (worker/embeddings.h). It sleeps only when nothing runs, and then only
// until the next batch is due. A task therefore waits at most one step, and
// an embedding batch at most one generation step past its due time. One
// exception: a generation that finds no generation running may wait for
// others to start with it, at most max_concurrent times `batch_wait` (see
// GatherStarts). It is the loop's WorkerPort (worker_port.h): the loop hands
// it work through those methods, which post to the worker thread through the
// Handoff and post the answers back (see handoff.h for the contract between
// the threads; the loop's side of it is loop/scheduler.h).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <thread>

#include "daemon/handoff.h"
#include "daemon/worker/embeddings.h"
#include "daemon/worker/generations.h"
#include "daemon/worker/model_store.h"
#include "daemon/worker/worker_port.h"

namespace medq::daemon {

struct WorkerOptions {
  int threads = 0;  // CPU threads of the engine's kernels (0: one per core)
  LoadPolicy load;
  GenerationPolicy generation;
  EmbedPolicy embed;
  // How long a generation that finds none running waits for another to
  // start in the same step, anew after each that comes (0: no wait), and
  // how many can run at once (the loop's max_concurrent: the wait ends when
  // that many have started).
  std::chrono::milliseconds batch_wait{0};
  int max_concurrent = 1;
};

class Worker final : public WorkerPort {
 public:
  Worker(Handoff& handoff, WorkerOptions options);
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Loop thread. Starts the thread.
  void Start();
  // Loop thread. Stops after the queued tasks and the running generations
  // (cancel them first to stop soon), and joins.
  void StopAndJoin();

  // Loop thread: the WorkerPort, as worker_port.h says.
  void RunTask(WorkerTask task) override;
  void StartGeneration(GenerationJob job) override;
  void StartEmbed(EmbedJob job) override;
  void TrimIfIdle() override;
  void Wake() override;
  // Any thread.
  int pending_embed_texts() const override { return embeddings_.pending_texts(); }
  int embed_batches_in_flight() const override { return embeddings_.in_flight(); }

  // Worker thread: what tasks work with.
  ModelStore& models() { return models_; }
  Generations& generations() { return generations_; }
  Embeddings& embeddings() { return embeddings_; }
  // Any thread may call the batcher's const counters (metrics).
  const Embeddings& embeddings() const { return embeddings_; }

  // Any thread: true when the worker is idle, or busy and has shown progress
  // (a task or a step ended) within `max_silence`.
  bool Responsive(std::chrono::milliseconds max_silence) const;

 private:
  void Run();
  void RunTasks(std::deque<Handoff::Closure>& tasks);
  void GatherStarts(bool* stopped);
  void Heartbeat();
  static int64_t NowMs();

  Handoff& handoff_;
  int threads_;
  std::chrono::milliseconds batch_wait_;
  int max_concurrent_;
  ModelStore models_;
  Generations generations_;
  Embeddings embeddings_;
  std::thread thread_;
  std::atomic<bool> busy_{false};
  std::atomic<int64_t> last_beat_ms_{0};
};

}  // namespace medq::daemon
