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
    // The Scheduler's tasks catch what their work throws; nothing escapes them.
    for (Handoff::Closure& task : tasks) {
      task();
      Heartbeat();
    }
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
