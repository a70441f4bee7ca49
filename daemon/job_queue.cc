#include "daemon/job_queue.h"

#include <algorithm>
#include <cmath>

namespace medq::daemon {
namespace {

constexpr std::string_view kPriorityNames[] = {"high", "normal", "low"};

double SecondsSince(JobQueue::Clock::time_point t) {
  return std::chrono::duration<double>(JobQueue::Clock::now() - t).count();
}

}  // namespace

std::string_view PriorityName(Priority p) {
  return kPriorityNames[static_cast<int>(p)];
}

std::optional<Priority> PriorityFromName(std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (kPriorityNames[i] == name) return static_cast<Priority>(i);
  }
  return std::nullopt;
}

Result<std::string> JobQueue::Submit(std::string op, Priority priority, StartFn start,
                                     DropFn drop) {
  const bool can_start_now = waiting_.empty() && running() < concurrency_;
  if (!can_start_now && waiting() >= max_queue_) {
    ++totals_.rejected;
    const double retry = std::max(1.0, std::ceil(EstimatedWaitS(waiting_.size() + 1)));
    return Error(ErrorCode::kQueueFull,
                 "Queue full (" + std::to_string(waiting()) + "/" + std::to_string(max_queue_) +
                     "). Try again later.",
                 retry);
  }
  Job job{"j" + std::to_string(next_id_++),
          std::move(op),
          priority,
          Clock::now(),
          {},
          std::move(start),
          std::move(drop)};
  std::string id = job.id;
  // Insert after every job of the same or a higher priority: FIFO per class.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                          [&](const Job& j) { return j.priority > priority; });
  waiting_.insert(pos, std::move(job));
  StartReady();
  return id;
}

void JobQueue::StartReady() {
  while (!waiting_.empty() && running() < concurrency_) {
    Job job = std::move(waiting_.front());
    waiting_.pop_front();
    job.started = Clock::now();
    StartFn start = job.start;
    std::string id = job.id;
    running_.push_back(std::move(job));
    start(id);  // may call Finish() re-entrantly for jobs that end at once
  }
}

void JobQueue::Finish(const std::string& job_id, Outcome outcome) {
  auto it =
      std::find_if(running_.begin(), running_.end(), [&](const Job& j) { return j.id == job_id; });
  if (it == running_.end()) return;
  const double service_s = SecondsSince(it->started);
  mean_service_s_ = mean_service_s_ == 0 ? service_s : 0.8 * mean_service_s_ + 0.2 * service_s;
  running_.erase(it);
  if (outcome == Outcome::kCancelled) {
    ++totals_.cancelled;
  } else {
    ++totals_.processed;
  }
  StartReady();
}

bool JobQueue::CancelWaiting(const std::string& job_id) {
  auto it =
      std::find_if(waiting_.begin(), waiting_.end(), [&](const Job& j) { return j.id == job_id; });
  if (it == waiting_.end()) return false;
  DropFn drop = std::move(it->drop);
  waiting_.erase(it);
  ++totals_.cancelled;
  drop(Error(ErrorCode::kCancelled, "job " + job_id + " was cancelled while waiting"));
  return true;
}

void JobQueue::DropAllWaiting(const Error& why) {
  std::deque<Job> dropped;
  dropped.swap(waiting_);
  totals_.rejected += static_cast<int64_t>(dropped.size());
  for (Job& job : dropped)
    job.drop(why);
}

double JobQueue::EstimatedWaitS(size_t jobs_ahead) const {
  const double per_job = mean_service_s_ > 0 ? mean_service_s_ : 1.0;
  return per_job * static_cast<double>(jobs_ahead) / std::max(1, concurrency_);
}

QueueInfo JobQueue::Describe() const {
  QueueInfo info;
  info.max_queue = max_queue_;
  info.totals = totals_;
  for (const Job& j : running_) {
    info.running.push_back(JobInfo{j.id, j.op, std::string(PriorityName(j.priority)), "running", 0,
                                   std::chrono::duration<double>(j.started - j.enqueued).count()});
  }
  int position = 1;
  for (const Job& j : waiting_) {
    info.waiting.push_back(JobInfo{j.id, j.op, std::string(PriorityName(j.priority)), "waiting",
                                   position++, SecondsSince(j.enqueued)});
  }
  return info;
}

}  // namespace medq::daemon
