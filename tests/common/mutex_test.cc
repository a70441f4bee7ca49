#include "common/mutex.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace medq {
namespace {

using std::chrono::steady_clock;

// A flag set by one thread and awaited by another, the way Handoff uses the
// wrapper: the analysis checks every access to `set` (clang's
// thread-safety leg compiles this file).
struct Flag {
  void Set() EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      set = true;
    }
    changed.NotifyOne();
  }
  // True once set; false if `deadline` passed first.
  bool WaitUntil(steady_clock::time_point deadline) EXCLUDES(mu) {
    MutexLock lock(mu);
    while (!set) {
      if (!changed.WaitUntil(mu, deadline)) return set;
    }
    return true;
  }
  bool Wait() EXCLUDES(mu) {
    MutexLock lock(mu);
    while (!set)
      changed.Wait(mu);
    return set;
  }

  Mutex mu;
  CondVar changed;
  bool set GUARDED_BY(mu) = false;
};

}  // namespace

TEST_CASE("CondVar::Wait returns once another thread notifies, with the mutex held again",
          "[mutex]") {
  Flag flag;
  std::thread setter([&] { flag.Set(); });
  CHECK(flag.Wait());
  setter.join();
  // The waiter released the mutex: it can be taken again.
  MutexLock lock(flag.mu);
  CHECK(flag.set);
}

TEST_CASE("CondVar::WaitUntil returns false at its deadline when nothing notifies", "[mutex]") {
  Flag flag;
  const auto start = steady_clock::now();
  CHECK_FALSE(flag.WaitUntil(start + std::chrono::milliseconds(20)));
  CHECK(steady_clock::now() - start >= std::chrono::milliseconds(20));
  CHECK_FALSE(flag.WaitUntil(start));  // a past deadline: no wait
}

TEST_CASE("CondVar::WaitUntil returns true when notified before its deadline", "[mutex]") {
  Flag flag;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    flag.Set();
  });
  CHECK(flag.WaitUntil(steady_clock::now() + std::chrono::seconds(30)));
  setter.join();
}

}  // namespace medq
