#include "daemon/loop/fs_work.h"

#include <pthread.h>

#include <spdlog/spdlog.h>

#include "daemon/loop/uv_guard.h"

namespace medq::daemon::internal {

void QueueFsWork(uv_loop_t* loop, std::unique_ptr<FsWork> job) {
  FsWork* raw = job.release();
  raw->req.data = raw;
  const int rc = uv_queue_work(
      loop, &raw->req,
      [](uv_work_t* req) {
        // libuv's threads have no name of their own; this one says what it does.
        pthread_setname_np(pthread_self(), "medq-fs");
        GuardCallback("filesystem work", [req] { static_cast<FsWork*>(req->data)->work(); });
      },
      [](uv_work_t* req, int status) {
        std::unique_ptr<FsWork> done(static_cast<FsWork*>(req->data));
        if (status != 0) return;  // cancelled: the loop is closing
        GuardCallback("filesystem work's completion", [&done] { done->after(); });
      });
  if (rc != 0) {
    spdlog::error("cannot queue filesystem work: {}", uv_strerror(rc));
    delete raw;
  }
}

}  // namespace medq::daemon::internal
