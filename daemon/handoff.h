// The one place where the loop thread and the worker thread meet.
//
// The loop thread (libuv) owns sockets, connections and the job queue. The
// worker thread owns LibTorch, the models and the GPU. They exchange closures
// only through this object:
//   - loop -> worker: PostToWorker() queues a task; the worker takes every
//     queued task between two steps (TakeTasks) and runs them in order.
//   - worker -> loop: PostToLoop() queues a completion and wakes the loop with
//     uv_async_send(); the loop runs every queued completion in one callback
//     (libuv coalesces sends, so the callback always drains the whole queue).
//     While a thread holds a WakeOnce, its posts only queue, and the loop is
//     woken once when it ends: a decode step's tokens, one per sequence, cost
//     the loop one wake-up rather than one each (each wake-up takes a core
//     from the engine for a while on a small machine).
// Closures must not throw. Whatever a closure captures is handed over: the
// sending thread must not touch it afterwards, and it is destroyed on the
// thread that runs the closure. So what belongs to the loop (a Responder, a
// callback holding one) must not end its life in a task: a task moves it into
// its completion, which takes it back to the loop. Two pairs use this class,
// each its own instance: the loop's Scheduler (daemon/loop/scheduler.h),
// which builds every task and completion from typed work, and the Worker,
// which runs them; and the loop's DurableJobs with the store thread
// (daemon/store/store_thread.h), where "worker" reads "store thread".
#pragma once

#include <chrono>
#include <deque>
#include <functional>

#include <uv.h>

#include "common/mutex.h"

namespace medq::daemon {

class Handoff {
 public:
  using Closure = std::function<void()>;

  // Loop thread. Registers the wake-up handle on `loop`.
  explicit Handoff(uv_loop_t* loop);
  Handoff(const Handoff&) = delete;
  Handoff& operator=(const Handoff&) = delete;

  // Loop thread.
  void PostToWorker(Closure task) EXCLUDES(mu_);
  // Loop thread: from now on the worker's TakeTasks() returns at once, with
  // `*stopped` set (and the tasks still queued).
  void StopWorker() EXCLUDES(mu_);
  // Loop thread: closes the wake-up handle; call after the worker has exited
  // and before the loop's last run. Completions still queued are run first.
  void Close() EXCLUDES(mu_);

  // Worker thread: every task queued so far, in order. Blocks until there is
  // one, the worker is stopped, or `wait_until` (time_point::max(): no limit;
  // a past time: no wait). `*stopped` tells whether StopWorker() was called
  // (the tasks returned still run).
  std::deque<Closure> TakeTasks(std::chrono::steady_clock::time_point wait_until, bool* stopped)
      EXCLUDES(mu_);
  // Worker thread (or any thread but the loop).
  void PostToLoop(Closure completion) EXCLUDES(mu_);

  // Worker thread (or any thread but the loop): for its lifetime, this
  // thread's PostToLoop() calls on `handoff` queue without waking the loop;
  // its end wakes the loop once if any did. Not nested.
  class WakeOnce {
   public:
    explicit WakeOnce(Handoff& handoff);
    ~WakeOnce();
    WakeOnce(const WakeOnce&) = delete;
    WakeOnce& operator=(const WakeOnce&) = delete;

   private:
    Handoff& handoff_;
  };

 private:
  static void OnAsync(uv_async_t* handle);
  void DrainCompletions() EXCLUDES(mu_);

  uv_async_t async_;
  Mutex mu_;
  CondVar task_ready_;  // tasks_ or stopping_ changed
  std::deque<Closure> tasks_ GUARDED_BY(mu_);
  std::deque<Closure> completions_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
};

}  // namespace medq::daemon
