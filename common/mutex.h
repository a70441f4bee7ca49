// medq::Mutex, MutexLock and CondVar: std::mutex and std::condition_variable
// with clang's thread-safety annotations (common/thread_annotations.h), as
// leveldb's port::Mutex and Abseil's Mutex. Every lock in medq that guards
// data is a Mutex, and the data it guards is marked GUARDED_BY it, so that
// the thread-safety leg (scripts/test thread-safety) checks each access.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace medq {

class CondVar;

// A non-recursive mutex. Any thread; prefer MutexLock to Lock/Unlock.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from its construction to its destruction.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A std::condition_variable waited on with a Mutex held. Wait and WaitUntil
// release the mutex while they wait and hold it again when they return; like
// std::condition_variable's, they may return without a notification, so call
// them in a loop that tests the condition (with the mutex held, which the
// analysis can check: a predicate lambda would be analysed as a function of
// its own, which holds nothing).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // the caller holds mu again, and releases it
  }
  // False once `deadline` has passed, true when woken before it.
  bool WaitUntil(Mutex& mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  // Any thread, with or without the mutex held.
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace medq
