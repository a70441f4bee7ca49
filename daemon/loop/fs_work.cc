#include "daemon/loop/fs_work.h"

#include <pthread.h>

#include <spdlog/spdlog.h>

#include "daemon/uv_guard.h"

namespace medq::daemon {
namespace {

int outstanding = 0;  // loop thread only

void Release(internal::FsWork* job) {
  if (--job->open == 0) delete job;
}

}  // namespace

int FsWorkOutstanding() {
  return outstanding;
}

Error FsWorkTimedOut() {
  return Error(ErrorCode::kNotReady,
               "the file system did not answer within " + std::to_string(kFsWorkTimeoutMs / 1000) +
                   " s (a stuck or very slow disk under the models directory); retry later",
               static_cast<double>(kFsWorkTimeoutMs / 1000));
}

namespace internal {

void QueueFsWork(uv_loop_t* loop, std::unique_ptr<FsWork> job) {
  FsWork* raw = job.release();
  raw->req.data = raw;
  raw->timer.data = raw;
  const int rc = uv_queue_work(
      loop, &raw->req,
      [](uv_work_t* req) {
        // libuv's threads have no name of their own; this one says what it does.
        pthread_setname_np(pthread_self(), "medq-fs");
        GuardCallback("filesystem work", [req] { static_cast<FsWork*>(req->data)->work(); });
      },
      [](uv_work_t* req, int status) {
        auto* done = static_cast<FsWork*>(req->data);
        --outstanding;
        if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&done->timer))) {
          uv_close(reinterpret_cast<uv_handle_t*>(&done->timer),
                   [](uv_handle_t* h) { Release(static_cast<FsWork*>(h->data)); });
        }
        // Not when cancelled (the loop is closing), nor when already answered.
        if (status == 0 && !done->answered) {
          done->answered = true;
          GuardCallback("filesystem work's completion", [done] { done->after(); });
        }
        done->work = nullptr;
        done->after = nullptr;
        done->timed_out = nullptr;
        Release(done);
      });
  if (rc != 0) {
    spdlog::error("cannot queue filesystem work: {}", uv_strerror(rc));
    delete raw;
    return;
  }
  ++outstanding;
  uv_timer_init(loop, &raw->timer);
  uv_timer_start(
      &raw->timer,
      [](uv_timer_t* t) {
        auto* late = static_cast<FsWork*>(t->data);
        uv_close(reinterpret_cast<uv_handle_t*>(t),
                 [](uv_handle_t* h) { Release(static_cast<FsWork*>(h->data)); });
        if (late->answered) return;
        late->answered = true;
        spdlog::error(
            "filesystem work has not finished after {} ms (a stuck disk?); its request is "
            "answered NOT_READY, and a thread of the file pool stays blocked until it returns",
            kFsWorkTimeoutMs);
        GuardCallback("filesystem work's timeout", [late] { late->timed_out(); });
      },
      kFsWorkTimeoutMs, 0);
  // The bound must not keep a loop that is otherwise done alive.
  uv_unref(reinterpret_cast<uv_handle_t*>(&raw->timer));
}

}  // namespace internal
}  // namespace medq::daemon
