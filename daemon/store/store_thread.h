// The store thread ("medq-store"): it owns the JobStore, so that SQLite's
// writes and their fsyncs never block the loop thread. The loop posts typed
// work; each runs on this thread in the order posted, and its result comes
// back to a completion on the loop thread, through a Handoff of its own
// (daemon/handoff.h: the same queue-plus-uv_async meeting point as the
// worker's). Only DurableJobs (daemon/loop/durable_jobs.h) posts here.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/result.h"
#include "daemon/handoff.h"
#include "daemon/store/job_store.h"

namespace medq::daemon::store {

class StoreThread {
 public:
  // Loop thread; registers the wake-up handle on `loop`.
  StoreThread(uv_loop_t* loop, std::unique_ptr<JobStore> store);
  ~StoreThread();
  StoreThread(const StoreThread&) = delete;
  StoreThread& operator=(const StoreThread&) = delete;

  // Loop thread: runs `work` on the store thread, then `done` with its result
  // on the loop thread. What `work` throws becomes INTERNAL.
  template <typename T>
  void Run(std::function<Result<T>(JobStore&)> work, std::function<void(Result<T>)> done);

  // Loop thread: lets the work already posted finish, joins the thread and
  // closes the wake-up handle (the completions still queued run first).
  void Stop();

 private:
  void Loop();

  Handoff handoff_;
  std::unique_ptr<JobStore> store_;
  std::thread thread_;
};

template <typename T>
void StoreThread::Run(std::function<Result<T>(JobStore&)> work,
                      std::function<void(Result<T>)> done) {
  handoff_.PostToWorker([this, work = std::move(work), done = std::move(done)]() mutable {
    auto result = std::make_shared<Result<T>>(Error(ErrorCode::kInternal, "job store: no result"));
    try {
      *result = work(*store_);
    } catch (const std::exception& e) {
      spdlog::error("job store: unexpected failure: {}", e.what());
      *result = Error(ErrorCode::kInternal, std::string("job store: ") + e.what());
    }
    handoff_.PostToLoop([done = std::move(done), result] {
      try {
        done(std::move(*result));
      } catch (const std::exception& e) {
        spdlog::error("a job store completion failed with an unexpected exception: {}", e.what());
      }
    });
  });
}

}  // namespace medq::daemon::store
