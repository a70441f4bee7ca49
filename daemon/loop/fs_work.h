// Filesystem work off the loop thread: resolving model names (stat, realpath
// through symlinks) and listing the models directories can block on a slow
// or network disk, so the loop hands them to libuv's threadpool and gets the
// result back as a callback on the loop. Loop thread only (the work itself
// runs on a threadpool thread and may only do filesystem reads on what it
// captured; ModelResolver's const methods are such reads).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include <uv.h>

namespace medq::daemon {

// Runs `work` on libuv's threadpool, then `done` with its result on the loop
// thread. `work` must not throw (return errors as values); `done` runs even
// when the loop is shutting down, so it must check what it relies on.
template <typename R>
void RunFsWork(uv_loop_t* loop, std::function<R()> work, std::function<void(R)> done);

namespace internal {

struct FsWork {
  uv_work_t req;
  std::function<void()> work;   // threadpool thread
  std::function<void()> after;  // loop thread
};

// Queues `job` (owned from here on) on the threadpool.
void QueueFsWork(uv_loop_t* loop, std::unique_ptr<FsWork> job);

}  // namespace internal

template <typename R>
void RunFsWork(uv_loop_t* loop, std::function<R()> work, std::function<void(R)> done) {
  auto result = std::make_shared<std::optional<R>>();
  auto job = std::make_unique<internal::FsWork>();
  job->work = [result, work = std::move(work)] { result->emplace(work()); };
  job->after = [result, done = std::move(done)] {
    // Empty only if `work` threw, against its contract: then `done` (and the
    // Responder it holds, which answers INTERNAL) is dropped.
    if (*result) done(std::move(**result));
  };
  internal::QueueFsWork(loop, std::move(job));
}

}  // namespace medq::daemon
