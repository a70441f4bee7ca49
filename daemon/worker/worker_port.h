// The loop's port to the worker: everything the loop's Scheduler
// (loop/scheduler.h) hands the worker thread, and the way each answer comes
// back. The Worker (worker.h) implements it by posting through its Handoff
// (daemon/handoff.h); the Scheduler's unit tests implement it with a fake
// that keeps what it is given and answers when the test says
// (tests/daemon/scheduler_test.cc). The loop depends on this header, never
// the worker on the loop.
//
// Threads: every method is called on the loop thread (but for the counters,
// which any thread may read). Every callback handed over (a task's `finish`,
// a generation's or embed request's sink) is called on the loop thread, and
// never from inside the call that handed it over. Only a task's `run` runs on
// the worker thread.
#pragma once

#include <functional>
#include <string>

#include "daemon/worker/embeddings.h"
#include "daemon/worker/generation.h"
#include "daemon/worker/report.h"

namespace medq::daemon {

class Worker;

// What a task's work leaves for the loop.
struct TaskEnd {
  bool ok = false;  // the work succeeded (the job completed, else it failed)
  // Loop thread: hands the work's typed result to its completion. Empty when
  // the work never returned.
  std::function<void()> deliver;
  // The worker's state after the work (memory, loaded models): set by the
  // port, not by `run`.
  WorkerReport report;
};

struct WorkerTask {
  std::string job;  // the job's id, for the log; empty for maintenance
  // Worker thread, at the worker's next turn (between two steps): the work.
  // Catches what the typed work throws (the Scheduler's does).
  std::function<TaskEnd(Worker& worker)> run;
  // Loop thread: what `run` returned, with the report taken after it.
  std::function<void(TaskEnd end)> finish;
};

class WorkerPort {
 public:
  virtual ~WorkerPort() = default;

  // Runs task.run on the worker, measures its memory, then calls task.finish
  // once on the loop. `run` and `finish`, and whatever they hold (a client's
  // Responder), are released on the loop thread: `run` before `finish` is
  // called.
  virtual void RunTask(WorkerTask task) = 0;

  // Hands a generation to the worker's step loop (generations.h), which
  // loads its model, reads its prompt and admits it into a batch when its
  // memory fits. Its sink is called on the loop thread: `report` at any time,
  // `admitted` at most once, when it joins a batch (before that the worker
  // holds it back: it has its slot but does not run), `token` only after
  // `admitted`, and `done` exactly once, also when starting it fails or it
  // is cancelled before it was admitted. The sink's callables may be
  // released on either thread: they must hold nothing that belongs to the
  // loop but what outlives the worker (the Scheduler, ids).
  virtual void StartGeneration(GenerationJob job) = 0;

  // Hands an embed request to the batcher (embeddings.h). Its sink as for a
  // generation: `report` at any time, `done` exactly once.
  virtual void StartEmbed(EmbedJob job) = 0;

  // Gives cached memory back (ReleaseCachedMemory) unless generations run:
  // after a task under `cleanup = after-each`.
  virtual void TrimIfIdle() = 0;

  // Wakes the worker at once, so that it sees a cancel flag the loop set
  // before the next embedding batch is due.
  virtual void Wake() = 0;

  // Any thread: texts waiting in the embedding batcher, and batches running
  // (metrics).
  virtual int pending_embed_texts() const = 0;
  virtual int embed_batches_in_flight() const = 0;
};

}  // namespace medq::daemon
