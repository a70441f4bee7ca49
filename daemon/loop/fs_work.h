// Filesystem work off the loop thread: resolving model names (stat, realpath
// through symlinks) and listing the models directories can block on a slow
// or network disk, so the loop hands them to libuv's threadpool and gets the
// result back as a callback on the loop. Loop thread only (the work itself
// runs on a threadpool thread and may only do filesystem reads on what it
// captured; ModelResolver's const methods are such reads).
//
// Bounded in time: work that has not finished after kFsWorkTimeoutMs is
// answered NOT_READY (with a retry hint) instead of being waited for, and
// its late result is dropped; the thread it holds is lost to the pool until
// the system call returns. Model files are opened without blocking
// (common/file_read.h), so only a stuck disk gets here. Shutdown does not
// wait for such work past the same bound (Server::Run).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include <uv.h>

#include "common/error.h"

namespace medq::daemon {

inline constexpr uint64_t kFsWorkTimeoutMs = 10'000;

// Runs `work` on libuv's threadpool, then `done` with its result on the loop
// thread; or, when `work` has not returned within kFsWorkTimeoutMs, `done`
// with NOT_READY saying so. `R` is a Result<> (constructible from an
// Error). `work` must not throw (return errors as values); `done` runs even
// when the loop is shutting down, so it must check what it relies on.
template <typename R>
void RunFsWork(uv_loop_t* loop, std::function<R()> work, std::function<void(R)> done);

// Work queued or running and not yet finished (loop thread): what shutdown
// would have to wait for.
int FsWorkOutstanding();

// The answer to work past its bound.
Error FsWorkTimedOut();

namespace internal {

struct FsWork {
  uv_work_t req;
  uv_timer_t timer;
  std::function<void()> work;       // threadpool thread
  std::function<void()> after;      // loop thread, when the work finished in time
  std::function<void()> timed_out;  // loop thread, when it did not
  bool answered = false;
  int open = 2;  // the work request and the timer: deleted once both are done
};

// Queues `job` (owned from here on) on the threadpool.
void QueueFsWork(uv_loop_t* loop, std::unique_ptr<FsWork> job);

}  // namespace internal

template <typename R>
void RunFsWork(uv_loop_t* loop, std::function<R()> work, std::function<void(R)> done) {
  static_assert(std::is_constructible_v<R, Error>, "RunFsWork's result must hold an Error");
  auto result = std::make_shared<std::optional<R>>();
  auto shared_done = std::make_shared<std::function<void(R)>>(std::move(done));
  auto job = std::make_unique<internal::FsWork>();
  job->work = [result, work = std::move(work)] { result->emplace(work()); };
  job->after = [result, shared_done] {
    // Empty only if `work` threw, against its contract: then `done` (and the
    // Responder it holds, which answers INTERNAL) is dropped.
    if (*result) (*shared_done)(std::move(**result));
  };
  job->timed_out = [shared_done] { (*shared_done)(R(FsWorkTimedOut())); };
  internal::QueueFsWork(loop, std::move(job));
}

}  // namespace medq::daemon
