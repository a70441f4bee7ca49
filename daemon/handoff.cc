#include "daemon/handoff.h"

#include "daemon/uv_guard.h"

namespace medq::daemon {
namespace {

// The Handoff whose wake-ups this thread holds back (a WakeOnce is open),
// and whether a post was held back since.
thread_local const Handoff* t_holding = nullptr;
thread_local bool t_held_back = false;

}  // namespace

Handoff::Handoff(uv_loop_t* loop) {
  uv_async_init(loop, &async_, &Handoff::OnAsync);
  async_.data = this;
}

void Handoff::PostToWorker(Closure task) {
  {
    MutexLock lock(mu_);
    tasks_.push_back(std::move(task));
  }
  task_ready_.NotifyOne();
}

void Handoff::StopWorker() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  task_ready_.NotifyAll();
}

std::deque<Handoff::Closure> Handoff::TakeTasks(std::chrono::steady_clock::time_point wait_until,
                                                bool* stopped) {
  MutexLock lock(mu_);
  while (!stopping_ && tasks_.empty()) {
    if (wait_until == std::chrono::steady_clock::time_point::max()) {
      task_ready_.Wait(mu_);
    } else if (!task_ready_.WaitUntil(mu_, wait_until)) {
      break;  // the deadline passed: whatever is queued now, maybe nothing
    }
  }
  *stopped = stopping_;
  std::deque<Closure> taken;
  taken.swap(tasks_);
  return taken;
}

void Handoff::PostToLoop(Closure completion) {
  {
    MutexLock lock(mu_);
    completions_.push_back(std::move(completion));
  }
  if (t_holding == this) {
    t_held_back = true;
    return;
  }
  uv_async_send(&async_);
}

Handoff::WakeOnce::WakeOnce(Handoff& handoff) : handoff_(handoff) {
  t_holding = &handoff_;
  t_held_back = false;
}

Handoff::WakeOnce::~WakeOnce() {
  t_holding = nullptr;
  if (t_held_back) uv_async_send(&handoff_.async_);
  t_held_back = false;
}

void Handoff::OnAsync(uv_async_t* handle) {
  GuardCallback("the handoff's completions",
                [handle] { static_cast<Handoff*>(handle->data)->DrainCompletions(); });
}

void Handoff::DrainCompletions() {
  std::deque<Closure> batch;
  {
    MutexLock lock(mu_);
    batch.swap(completions_);
  }
  // Each completion is guarded on its own: one that throws (against the
  // contract above) must not drop the ones queued behind it, whose clients
  // wait for their replies.
  for (Closure& c : batch)
    GuardCallback("a completion from the worker", [&c] { c(); });
}

void Handoff::Close() {
  DrainCompletions();
  uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
}

}  // namespace medq::daemon
