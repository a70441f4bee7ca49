// A typed piece of work for the worker thread and its typed completion on
// the loop, erased into the WorkerTask::run a WorkerPort takes
// (worker_port.h). The Scheduler (loop/scheduler.h) queues tasks; what runs
// on the worker, and the guard around it, is here.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "common/result.h"
#include "daemon/worker/worker_port.h"

namespace medq::daemon {

template <typename R>
using WorkerWork = std::function<Result<R>(Worker& worker)>;  // runs on the worker
template <typename R>
using WorkDone = std::function<void(Result<R> result)>;  // runs on the loop

// Worker thread: runs `work`; what it throws becomes INTERNAL, logged.
template <typename R>
Result<R> RunGuarded(const WorkerWork<R>& work, Worker& worker) {
  try {
    return work(worker);
  } catch (const std::exception& e) {
    spdlog::error("worker task failed with an unexpected exception: {}", e.what());
    return Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what());
  }
}

// `work` as a WorkerTask's run: it runs guarded on the worker, and the
// TaskEnd it leaves hands its result to `done` on the loop.
template <typename R>
std::function<TaskEnd(Worker& worker)> EraseWork(WorkerWork<R> work,
                                                 std::shared_ptr<WorkDone<R>> done) {
  return [work = std::move(work), done = std::move(done)](Worker& worker) {
    auto result = std::make_shared<Result<R>>(RunGuarded(work, worker));
    return TaskEnd{result->ok(), [done, result] { (*done)(std::move(*result)); }, {}};
  };
}

}  // namespace medq::daemon
