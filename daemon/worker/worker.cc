#include "daemon/worker/worker.h"

#include <pthread.h>

#include <exception>

#include <spdlog/spdlog.h>

#include "daemon/engine/engine.h"

namespace medq::daemon {

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

void Worker::Submit(Work work, Done done) {
  handoff_.PostToWorker([this, work = std::move(work), done = std::move(done)]() mutable {
    Result<nlohmann::json> result = Error(ErrorCode::kInternal, "worker task did not run");
    try {
      result = work();
    } catch (const std::exception& e) {
      spdlog::error("worker task failed with an unexpected exception: {}", e.what());
      result = Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what());
    }
    handoff_.PostToLoop([done = std::move(done), result = std::move(result)]() mutable {
      done(std::move(result));
    });
  });
}

void Worker::Run() {
  pthread_setname_np(pthread_self(), "medq-worker");
  engine::InitWorkerThread(threads_);
  while (auto task = handoff_.WaitForTask()) {
    Heartbeat();
    busy_ = true;
    (*task)();
    busy_ = false;
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
