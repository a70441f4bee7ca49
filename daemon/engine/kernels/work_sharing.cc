#include "daemon/engine/kernels/work_sharing.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace medq::engine::kernels {
namespace {

// One call of ShareWork. Helpers hold it by shared_ptr, so a helper that
// wakes after the call returned only touches this object, never fn.
struct Job {
  int64_t chunks = 0;
  // Valid while the caller waits, i.e. while a claimed chunk is unfinished:
  // a helper dereferences it only after claiming a chunk.
  const std::function<void(int64_t)>* fn = nullptr;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

// Claims and runs chunks until none is left.
void Drain(Job& job) {
  for (;;) {
    const int64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.chunks) return;
    (*job.fn)(chunk);
    job.done.fetch_add(1, std::memory_order_release);
  }
}

// How long an idle helper polls for the next job before it sleeps: decode
// calls Linear() every few tens of microseconds, so a polling helper picks
// the next job up at once, and an idle daemon stops using the CPU. For the
// first kBusyTime it polls with the CPU's pause hint only; after that it
// yields between polls, so that on a busy machine it gives its core away.
// (A sched_yield is a system call, a microsecond or more on a VM; polling
// with the pause hint, a hand-off measured about 3 µs on 2 cores.)
constexpr auto kSpinTime = std::chrono::microseconds(200);
constexpr auto kBusyTime = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Pool {
 public:
  void Run(int64_t chunks, int helpers, const std::function<void(int64_t)>& fn) {
    MutexLock serial(run_mutex_);
    Grow(helpers);
    auto job = std::make_shared<Job>();
    job->chunks = chunks;
    job->fn = &fn;
    {
      MutexLock lock(mutex_);
      current_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.NotifyAll();
    Drain(*job);
    // Only chunks claimed by a helper can still be running.
    while (job->done.load(std::memory_order_acquire) < chunks)
      std::this_thread::yield();
  }

 private:
  void Grow(int helpers) {
    while (static_cast<int>(threads_.size()) < helpers) {
      threads_.emplace_back([this] { HelperLoop(); });
      threads_.back().detach();
    }
  }

  void HelperLoop() {
    uint64_t seen = 0;
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      const auto busy_until = start + kBusyTime, spin_until = start + kSpinTime;
      for (int polls = 0; generation_.load(std::memory_order_acquire) == seen; ++polls) {
        if (polls % 64 != 0) {  // read the clock now and then only
          CpuRelax();
          continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= spin_until) break;
        if (now >= busy_until) std::this_thread::yield();
      }
      std::shared_ptr<Job> job;
      {
        MutexLock lock(mutex_);
        while (generation_.load(std::memory_order_relaxed) == seen)
          wake_.Wait(mutex_);
        seen = generation_.load(std::memory_order_relaxed);
        job = current_;
      }
      if (job != nullptr) Drain(*job);
    }
  }

  Mutex run_mutex_;  // one job at a time
  Mutex mutex_;      // generation_ changes under it
  CondVar wake_;
  std::shared_ptr<Job> current_ GUARDED_BY(mutex_);
  std::atomic<uint64_t> generation_{0};
  std::vector<std::thread> threads_;  // detached; only their count matters
};

Pool& GlobalPool() {
  // Never destroyed: detached helpers may still poll it while the process
  // exits.
  static Pool* pool = new Pool();
  return *pool;
}

}  // namespace

void ShareWork(int64_t chunks, int helpers, const std::function<void(int64_t)>& fn) {
  if (chunks <= 0) return;
  if (helpers <= 0 || chunks == 1) {
    for (int64_t c = 0; c < chunks; ++c)
      fn(c);
    return;
  }
  GlobalPool().Run(chunks, helpers, fn);
}

}  // namespace medq::engine::kernels
