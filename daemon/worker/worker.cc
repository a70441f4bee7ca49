#include "daemon/worker/worker.h"

#include <pthread.h>

#include <exception>

#include <spdlog/spdlog.h>

#include "daemon/engine/engine.h"

namespace medq::daemon {

using Clock = std::chrono::steady_clock;

Worker::Worker(Handoff& handoff, WorkerOptions options)
    : handoff_(handoff),
      threads_(options.threads),
      batch_wait_(options.batch_wait),
      max_concurrent_(options.max_concurrent),
      models_(std::move(options.load)),
      generations_(models_, std::move(options.generation)),
      embeddings_(models_, std::move(options.embed), [this] { return generations_.busy(); }) {}

Worker::~Worker() {
  StopAndJoin();
}

void Worker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Worker::StopAndJoin() {
  if (!thread_.joinable()) return;
  handoff_.StopWorker();
  thread_.join();
}

void Worker::Run() {
  pthread_setname_np(pthread_self(), "medq-worker");
  engine::InitWorkerThread(threads_);
  bool stopped = false;
  while (true) {
    // Running generations: no wait. Pending embeddings: until their batch is
    // due. Otherwise until a task comes. Once stopped, batches go at once.
    const auto wait_until =
        generations_.busy() || stopped ? Clock::time_point::min() : embeddings_.NextDue();
    std::deque<Handoff::Closure> tasks = handoff_.TakeTasks(wait_until, &stopped);
    busy_ = true;
    Heartbeat();
    const bool none_running = !generations_.busy();
    RunTasks(tasks);
    if (none_running && generations_.busy()) GatherStarts(&stopped);
    if (generations_.busy()) {
      const Handoff::WakeOnce one_wake(handoff_);  // the step's tokens, together
      try {
        generations_.Step();
      } catch (const std::exception& e) {
        // A bug: every generation is ended with INTERNAL rather than left
        // waiting for a reply that would never come.
        spdlog::error("generation step failed with an unexpected exception: {}", e.what());
        generations_.FailAll(
            Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
      }
      Heartbeat();
    }
    if (embeddings_.busy()) {
      const Handoff::WakeOnce one_wake(handoff_);
      try {
        embeddings_.Step(Clock::now(), /*flush=*/stopped);
      } catch (const std::exception& e) {
        spdlog::error("embedding step failed with an unexpected exception: {}", e.what());
        embeddings_.FailAll(
            Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
      }
      Heartbeat();
    }
    busy_ = false;
    if (stopped && tasks.empty() && !generations_.busy() && !embeddings_.busy()) break;
  }
}

// Generations sent together reach the worker a little apart: each is read,
// checked and queued by the loop in turn, and on a small CPU the engine's
// threads, once a step runs, leave the loop and the clients little time.
// Were the first one's steps begun at once, the others' prompts would be
// read in its later steps, and its tokens would wait for them: steps of
// prompt reading in the middle of its output. So a generation that finds
// none running waits for more, and those that come start with it: their
// prompts are read together in the first step, as one batch. The wait ends
// once batch_wait_ has passed with no other generation coming (each one
// that comes starts it anew, so the whole wait is at most max_concurrent_
// times batch_wait_), once max_concurrent_ have started (no more can come),
// or on stop. Other tasks that come meanwhile run in their order.
void Worker::GatherStarts(bool* stopped) {
  if (batch_wait_.count() <= 0 || max_concurrent_ <= 1) return;
  auto until = Clock::now() + batch_wait_;
  while (!*stopped && generations_.count() < max_concurrent_) {
    std::deque<Handoff::Closure> tasks = handoff_.TakeTasks(until, stopped);
    if (tasks.empty()) return;  // the wait is over
    const int before = generations_.count();
    RunTasks(tasks);
    // Another came: more may be on their way.
    if (generations_.count() > before) until = Clock::now() + batch_wait_;
  }
}

void Worker::RunTasks(std::deque<Handoff::Closure>& tasks) {
  // The Scheduler's tasks catch what their work throws; nothing escapes them.
  for (Handoff::Closure& task : tasks) {
    task();
    Heartbeat();
  }
}

int64_t Worker::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Worker::Heartbeat() {
  last_beat_ms_ = NowMs();
}

bool Worker::Responsive(std::chrono::milliseconds max_silence) const {
  return !busy_ || NowMs() - last_beat_ms_ <= max_silence.count();
}

}  // namespace medq::daemon
