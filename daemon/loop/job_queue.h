// The job queue: which job runs next on the worker. Loop thread only.
//
// Jobs wait in three priority classes (high, normal, low), FIFO within a
// class, at most `max_queue` waiting in all. At most `concurrency` jobs run at
// once (1: the generation lock). A job that cannot be queued is refused at
// once with QUEUE_FULL and a retry hint: the wait for the work ahead of it
// (daemon/loop/wait_estimate.h: tokens over the measured decode rate for
// generations, recent run times for other jobs).
//
// Aging: every `aging_s` a job has waited moves it up one class (low ->
// normal -> high), so a low-priority job is never starved: it runs at the
// latest after jobs that arrived before it in its new class. Order: class
// after aging, then arrival.
//
// A waiting job leaves with QUEUE_TIMEOUT once its queue deadline passes,
// or with TIMEOUT once the request's own deadline (timeout_s) does (Tick,
// called by a timer).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/messages.h"
#include "common/result.h"
#include "daemon/loop/wait_estimate.h"

namespace medq::daemon {

enum class Priority { kHigh = 0, kNormal = 1, kLow = 2 };
std::string_view PriorityName(Priority p);
std::optional<Priority> PriorityFromName(std::string_view name);

class JobQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // Called when the job may start. The job must end with Finish(id).
  using StartFn = std::function<void(const std::string& job_id)>;
  // Called when the job leaves the queue without running (cancelled, timed
  // out, or the daemon is draining), with the error its client should get.
  using DropFn = std::function<void(const Error& why)>;
  // Called whenever a waiting job's place changes (and once when queued):
  // the job's id, its 1-based position, jobs waiting, estimated seconds until
  // it starts.
  using PositionFn = std::function<void(const std::string& job_id, int position, int waiting,
                                        double estimated_wait_s)>;

  enum class Outcome { kCompleted, kFailed, kCancelled };

  JobQueue(int max_queue, int concurrency, double aging_s = 60)
      : max_queue_(max_queue), concurrency_(concurrency), aging_s_(aging_s) {}

  struct Options {
    Priority priority = Priority::kNormal;
    std::optional<Clock::time_point> deadline;  // QUEUE_TIMEOUT after this
    PositionFn on_position;                     // may be empty
    // The job's id, unique across the daemon's queues; empty: "j" and a
    // number of this queue's own.
    std::string id;
    // Queued even when max_queue jobs wait: a job accepted before a restart
    // (daemon/loop/durable_jobs.h), which must not be refused now.
    bool past_limit = false;
    // Who may act on the job (cancel it): the client's ReplyChannel::owner(),
    // "uid:N" or "http"; empty for the daemon's own work.
    std::string owner;
    // The request's own deadline (timeout_s, queue wait plus run): a job
    // still waiting past it leaves with TIMEOUT. `timeout_s` is for the
    // message. The Scheduler stops a running job past it.
    std::optional<Clock::time_point> timeout_at;
    double timeout_s = 0;
    // The most tokens the job generates (a generation's effective
    // max_tokens), for the wait estimate; 0: a job without tokens, counted
    // by its run time.
    int64_t tokens = 0;
  };

  // Queues a job, or starts it at once when a slot is free and nobody waits.
  // Returns the new job's id, or QUEUE_FULL.
  Result<std::string> Submit(std::string op, Options options, StartFn start, DropFn drop);
  Result<std::string> Submit(std::string op, Priority priority, StartFn start, DropFn drop) {
    Options options;
    options.priority = priority;
    return Submit(std::move(op), std::move(options), std::move(start), std::move(drop));
  }

  // QUEUE_FULL (with its retry hint) when a job submitted now would be
  // refused, Ok otherwise.
  Status CheckRoom();

  // Drops waiting jobs whose deadline has passed (QUEUE_TIMEOUT) and applies
  // aging. Call periodically.
  void Tick();

  // A running job ended; starts the next ones.
  void Finish(const std::string& job_id, Outcome outcome);

  // A running job produced `tokens` more tokens (ignored for jobs not
  // running).
  void AddProgress(const std::string& job_id, int64_t tokens);
  // A generation ended having produced `tokens` tokens, the first
  // `decode_s` seconds before the last: the decode rate the estimate uses.
  void ObserveDecode(int64_t tokens, double decode_s) { estimate_.ObserveDecode(tokens, decode_s); }

  // Removes a waiting job (its DropFn gets CANCELLED). Returns false when no
  // such job waits (it may be running: the caller stops it instead).
  bool CancelWaiting(const std::string& job_id);
  bool IsRunning(const std::string& job_id) const;
  // The owner of a waiting or running job (Options::owner); nullopt when no
  // such job is here.
  std::optional<std::string> OwnerOf(const std::string& job_id) const;

  // Drops every waiting job with `why` (on shutdown).
  void DropAllWaiting(const Error& why);

  QueueInfo Describe() const;
  // Seconds until a job at `position` (1-based) may start: the running jobs'
  // remaining tokens and the tokens of the waiting jobs ahead of it (or
  // their run times, for jobs without tokens), as wait_estimate.h counts.
  double EstimatedWaitS(size_t position) const;
  const WaitEstimator& estimate() const { return estimate_; }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int running() const { return static_cast<int>(running_.size()); }
  int max_queue() const { return max_queue_; }
  void set_max_queue(int max_queue) { max_queue_ = max_queue; }
  const QueueTotals& totals() const { return totals_; }

 private:
  struct Job {
    std::string id;
    std::string op;
    Priority priority = Priority::kNormal;
    Clock::time_point enqueued;
    Clock::time_point started;
    std::optional<Clock::time_point> deadline;
    StartFn start;
    DropFn drop;
    PositionFn on_position;
    int last_position = 0;
    std::string owner;
    std::optional<Clock::time_point> timeout_at;
    double timeout_s = 0;
    int64_t tokens = 0;                         // Options::tokens
    int64_t tokens_done = 0;                    // produced so far (running jobs)
    Clock::time_point first_token, last_token;  // of the progress reported
  };

  int EffectiveClass(const Job& job, Clock::time_point now) const;
  void Reorder();
  void StartReady();
  void NotifyPositions();
  // The running generations' mean decode rate so far (tokens a second); 0
  // when none has produced two tokens yet.
  double LiveTokensPerS() const;

  int max_queue_;
  int concurrency_;
  double aging_s_;
  uint64_t next_id_ = 1;
  std::deque<Job> waiting_;  // kept in run order: by priority, FIFO within
  std::vector<Job> running_;
  QueueTotals totals_;
  WaitEstimator estimate_;
};

}  // namespace medq::daemon
