#include "daemon/store/store_thread.h"

#include <pthread.h>

namespace medq::daemon::store {

StoreThread::StoreThread(uv_loop_t* loop, std::unique_ptr<JobStore> store)
    : handoff_(loop), store_(std::move(store)) {
  thread_ = std::thread([this] { Loop(); });
}

StoreThread::~StoreThread() {
  Stop();
}

void StoreThread::Stop() {
  if (!thread_.joinable()) return;
  handoff_.StopWorker();
  thread_.join();
  handoff_.Close();
}

void StoreThread::Loop() {
  pthread_setname_np(pthread_self(), "medq-store");
  for (bool stopped = false; !stopped;) {
    std::deque<Handoff::Closure> tasks =
        handoff_.TakeTasks(std::chrono::steady_clock::time_point::max(), &stopped);
    for (Handoff::Closure& task : tasks)
      task();  // Run() wraps each in a try
  }
}

}  // namespace medq::daemon::store
