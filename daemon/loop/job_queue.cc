#include "daemon/loop/job_queue.h"

#include <algorithm>
#include <cmath>

#include "common/elapsed.h"

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

Status JobQueue::CheckRoom() {
  const bool can_start_now = waiting_.empty() && running() < concurrency_;
  if (can_start_now || waiting() < max_queue_) return Status::Ok();
  ++totals_.rejected;
  return Error(ErrorCode::kQueueFull,
               "Queue full (" + std::to_string(waiting()) + "/" + std::to_string(max_queue_) +
                   "). Try again later.",
               RetryAfterS(EstimatedWaitS(waiting_.size() + 1)));
}

Result<std::string> JobQueue::Submit(std::string op, Options options, StartFn start, DropFn drop) {
  if (!options.past_limit) {
    if (Status room = CheckRoom(); !room.ok()) return room.error();
  }
  Job job;
  job.id = options.id.empty() ? "j" + std::to_string(next_id_++) : std::move(options.id);
  job.op = std::move(op);
  job.priority = options.priority;
  job.enqueued = Clock::now();
  job.deadline = options.deadline;
  job.start = std::move(start);
  job.drop = std::move(drop);
  job.on_position = std::move(options.on_position);
  job.owner = std::move(options.owner);
  job.timeout_at = options.timeout_at;
  job.timeout_s = options.timeout_s;
  job.tokens = std::max<int64_t>(0, options.tokens);
  std::string id = job.id;
  waiting_.push_back(std::move(job));
  Reorder();
  StartReady();
  NotifyPositions();
  return id;
}

int JobQueue::EffectiveClass(const Job& job, Clock::time_point now) const {
  int cls = static_cast<int>(job.priority);
  if (aging_s_ > 0) {
    const double waited = std::chrono::duration<double>(now - job.enqueued).count();
    cls -= static_cast<int>(waited / aging_s_);
  }
  return std::max(0, cls);
}

void JobQueue::Reorder() {
  const auto now = Clock::now();
  std::stable_sort(waiting_.begin(), waiting_.end(), [&](const Job& a, const Job& b) {
    const int ca = EffectiveClass(a, now), cb = EffectiveClass(b, now);
    return ca != cb ? ca < cb : a.enqueued < b.enqueued;
  });
}

void JobQueue::NotifyPositions() {
  int position = 1;
  for (Job& job : waiting_) {
    if (job.last_position != position && job.on_position) {
      job.on_position(job.id, position, waiting(), EstimatedWaitS(static_cast<size_t>(position)));
    }
    job.last_position = position++;
  }
}

void JobQueue::Tick() {
  const auto now = Clock::now();
  std::vector<Job> expired;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if ((it->deadline && now >= *it->deadline) || (it->timeout_at && now >= *it->timeout_at)) {
      expired.push_back(std::move(*it));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
  for (Job& job : expired) {
    ++totals_.timed_out;
    const double waited = std::chrono::duration<double>(now - job.enqueued).count();
    if (job.timeout_at && now >= *job.timeout_at) {
      job.drop(Error(ErrorCode::kTimeout,
                     "job " + job.id + " did not start within its timeout_s of " +
                         FormatSeconds(job.timeout_s) + " s (it waited " +
                         std::to_string(static_cast<int>(waited)) + " s in the queue)"));
      continue;
    }
    job.drop(Error(ErrorCode::kQueueTimeout,
                   "job " + job.id + " waited " + std::to_string(static_cast<int>(waited)) +
                       " s in the queue without starting; try again later or raise "
                       "queue_timeout_s",
                   RetryAfterS(EstimatedWaitS(1))));
  }
  Reorder();
  NotifyPositions();
}

bool JobQueue::IsRunning(const std::string& job_id) const {
  return std::any_of(running_.begin(), running_.end(),
                     [&](const Job& j) { return j.id == job_id; });
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
  // A generation's rate comes from its own timings (ObserveDecode).
  if (it->tokens == 0) estimate_.ObserveRun(SecondsSince(it->started));
  running_.erase(it);
  if (outcome == Outcome::kCancelled) {
    ++totals_.cancelled;
  } else {
    ++totals_.processed;
  }
  StartReady();
  NotifyPositions();
}

void JobQueue::AddProgress(const std::string& job_id, int64_t tokens) {
  for (Job& j : running_) {
    if (j.id != job_id) continue;
    const auto now = Clock::now();
    if (j.tokens_done == 0) j.first_token = now;
    j.last_token = now;
    j.tokens_done += std::max<int64_t>(0, tokens);
    return;
  }
}

double JobQueue::LiveTokensPerS() const {
  double sum = 0;
  int n = 0;
  for (const Job& j : running_) {
    const double s = std::chrono::duration<double>(j.last_token - j.first_token).count();
    if (j.tokens_done < 2 || s <= 0) continue;
    sum += static_cast<double>(j.tokens_done - 1) / s;
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

bool JobQueue::CancelWaiting(const std::string& job_id) {
  auto it =
      std::find_if(waiting_.begin(), waiting_.end(), [&](const Job& j) { return j.id == job_id; });
  if (it == waiting_.end()) return false;
  DropFn drop = std::move(it->drop);
  waiting_.erase(it);
  ++totals_.cancelled;
  drop(Error(ErrorCode::kCancelled, "job " + job_id + " was cancelled while waiting"));
  NotifyPositions();
  return true;
}

void JobQueue::DropAllWaiting(const Error& why) {
  std::deque<Job> dropped;
  dropped.swap(waiting_);
  totals_.rejected += static_cast<int64_t>(dropped.size());
  for (Job& job : dropped)
    job.drop(why);
}

double JobQueue::EstimatedWaitS(size_t position) const {
  int64_t tokens = 0, jobs = 0;
  auto count = [&](const Job& j, int64_t done) {
    if (j.tokens > 0) {
      tokens += std::max<int64_t>(0, j.tokens - done);
    } else {
      ++jobs;
    }
  };
  for (const Job& j : running_)
    count(j, j.tokens_done);
  const size_t ahead = std::min(position > 0 ? position - 1 : 0, waiting_.size());
  for (size_t i = 0; i < ahead; ++i)
    count(waiting_[i], 0);
  return estimate_.WaitS(tokens, jobs, concurrency_, LiveTokensPerS());
}

std::optional<std::string> JobQueue::OwnerOf(const std::string& job_id) const {
  for (const Job& j : running_) {
    if (j.id == job_id) return j.owner;
  }
  for (const Job& j : waiting_) {
    if (j.id == job_id) return j.owner;
  }
  return std::nullopt;
}

QueueInfo JobQueue::Describe() const {
  QueueInfo info;
  info.max_queue = max_queue_;
  info.totals = totals_;
  for (const Job& j : running_) {
    info.running.push_back(JobInfo{j.id, j.op, std::string(PriorityName(j.priority)), "running", 0,
                                   std::chrono::duration<double>(j.started - j.enqueued).count(),
                                   ""});
  }
  int position = 1;
  for (const Job& j : waiting_) {
    info.waiting.push_back(JobInfo{j.id, j.op, std::string(PriorityName(j.priority)), "waiting",
                                   position++, SecondsSince(j.enqueued), ""});
  }
  return info;
}

}  // namespace medq::daemon
