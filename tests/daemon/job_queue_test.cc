#include "daemon/loop/job_queue.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <thread>

#include "daemon/loop/scheduler.h"

namespace medq::daemon {
namespace {

// Records the order in which jobs start and why jobs were dropped.
struct Recorder {
  std::vector<std::string> started;
  std::vector<ErrorCode> dropped;

  JobQueue::StartFn Start() {
    return [this](const std::string& id) { started.push_back(id); };
  }
  JobQueue::DropFn Drop() {
    return [this](const Error& e) { dropped.push_back(e.code); };
  }
};

}  // namespace

TEST_CASE("one job runs at a time, the rest wait in priority order, FIFO within", "[queue]") {
  JobQueue q(10, 1);
  Recorder r;
  auto first = q.Submit("gen", Priority::kNormal, r.Start(), r.Drop());
  REQUIRE(first.ok());
  CHECK(r.started == std::vector<std::string>{*first});
  auto low = q.Submit("gen", Priority::kLow, r.Start(), r.Drop());
  auto normal1 = q.Submit("gen", Priority::kNormal, r.Start(), r.Drop());
  auto high = q.Submit("gen", Priority::kHigh, r.Start(), r.Drop());
  auto normal2 = q.Submit("gen", Priority::kNormal, r.Start(), r.Drop());
  CHECK(q.running() == 1);
  CHECK(q.waiting() == 4);

  QueueInfo info = q.Describe();
  REQUIRE(info.waiting.size() == 4);
  CHECK(info.waiting[0].job == *high);
  CHECK(info.waiting[0].position == 1);
  CHECK(info.waiting[1].job == *normal1);
  CHECK(info.waiting[2].job == *normal2);
  CHECK(info.waiting[3].job == *low);
  CHECK(info.waiting[3].priority == "low");
  CHECK(info.running.at(0).job == *first);

  for (const auto& id : {*first, *high, *normal1, *normal2})
    q.Finish(id, JobQueue::Outcome::kCompleted);
  CHECK(r.started == std::vector<std::string>{*first, *high, *normal1, *normal2, *low});
  q.Finish(*low, JobQueue::Outcome::kFailed);
  CHECK(q.totals().processed == 5);
  CHECK(q.running() == 0);
}

TEST_CASE("a full queue refuses at once with a retry hint", "[queue]") {
  JobQueue q(2, 1);
  Recorder r;
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());  // runs
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());  // waits 1
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());  // waits 2
  auto full = q.Submit("gen", Priority::kHigh, r.Start(), r.Drop());
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code == ErrorCode::kQueueFull);
  CHECK(full.error().message == "Queue full (2/2). Try again later.");
  REQUIRE(full.error().retry_after_s.has_value());
  CHECK(*full.error().retry_after_s >= 1);
  CHECK(q.totals().rejected == 1);
}

TEST_CASE("cancelling a waiting job drops it with CANCELLED", "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  auto running = q.Submit("gen", Priority::kNormal, r.Start(), r.Drop());
  auto waiting = q.Submit("gen", Priority::kNormal, r.Start(), r.Drop());
  CHECK_FALSE(q.CancelWaiting(*running));  // running jobs are stopped by their owner
  CHECK(q.CancelWaiting(*waiting));
  CHECK(r.dropped == std::vector<ErrorCode>{ErrorCode::kCancelled});
  CHECK(q.waiting() == 0);
  CHECK(q.totals().cancelled == 1);
  q.Finish(*running, JobQueue::Outcome::kCompleted);
  CHECK(r.started.size() == 1);
}

TEST_CASE("a job's owner is known while it waits and runs, and only it may act on it", "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  JobQueue::Options alice;
  alice.owner = "uid:1001";
  JobQueue::Options bob;
  bob.owner = "uid:1002";
  auto running = q.Submit("gen", alice, r.Start(), r.Drop());
  auto waiting = q.Submit("gen", bob, r.Start(), r.Drop());
  REQUIRE(running.ok());
  REQUIRE(waiting.ok());
  CHECK(q.OwnerOf(*running) == "uid:1001");
  CHECK(q.OwnerOf(*waiting) == "uid:1002");
  CHECK_FALSE(q.OwnerOf("j999").has_value());
  q.Finish(*running, JobQueue::Outcome::kCompleted);
  CHECK_FALSE(q.OwnerOf(*running).has_value());  // gone once it ended

  CHECK(MayActOnJob("uid:1001", "uid:1001"));
  CHECK_FALSE(MayActOnJob("uid:1001", "uid:1002"));  // another user's job
  CHECK_FALSE(MayActOnJob("uid:1001", "http"));
  CHECK_FALSE(MayActOnJob("", ""));         // the daemon's own work; a client that has gone
  CHECK(MayActOnJob("uid:1001", "uid:0"));  // root
  CHECK(MayActOnJob("uid:1001", "uid:" + std::to_string(getuid())));  // the daemon's user
}

TEST_CASE("draining drops every waiting job", "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());
  REQUIRE(q.Submit("gen", Priority::kLow, r.Start(), r.Drop()).ok());
  REQUIRE(q.Submit("gen", Priority::kHigh, r.Start(), r.Drop()).ok());
  q.DropAllWaiting(Error(ErrorCode::kNotReady, "shutting down"));
  CHECK(r.dropped == std::vector<ErrorCode>{ErrorCode::kNotReady, ErrorCode::kNotReady});
  CHECK(q.waiting() == 0);
  CHECK(q.running() == 1);
}

TEST_CASE("priority names round-trip", "[queue]") {
  for (Priority p : {Priority::kHigh, Priority::kNormal, Priority::kLow}) {
    CHECK(PriorityFromName(PriorityName(p)) == p);
  }
  CHECK_FALSE(PriorityFromName("urgent").has_value());
}

}  // namespace medq::daemon

namespace medq::daemon {

TEST_CASE("waiting jobs hear their position whenever it changes", "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  std::map<std::string, std::vector<int>> positions;
  auto track = [&](Priority p) {
    JobQueue::Options o;
    o.priority = p;
    o.on_position = [&](const std::string& id, int position, int waiting, double wait_s) {
      positions[id].push_back(position);
      CHECK(waiting == q.waiting());
      CHECK(wait_s > 0);
    };
    return q.Submit("gen", std::move(o), r.Start(), r.Drop());
  };
  auto running = track(Priority::kNormal);
  CHECK(positions.empty());  // started at once: never queued
  auto a = track(Priority::kNormal);
  auto b = track(Priority::kNormal);
  auto c = track(Priority::kHigh);  // jumps ahead: a and b move back
  CHECK(positions[*a] == std::vector<int>{1, 2});
  CHECK(positions[*b] == std::vector<int>{2, 3});
  CHECK(positions[*c] == std::vector<int>{1});
  q.Finish(*running, JobQueue::Outcome::kCompleted);  // c starts; a and b move up
  CHECK(positions[*a] == std::vector<int>{1, 2, 1});
  CHECK(positions[*b] == std::vector<int>{2, 3, 2});
}

TEST_CASE("a job past its deadline leaves the queue with QUEUE_TIMEOUT", "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());
  JobQueue::Options o;
  o.deadline = JobQueue::Clock::now() - std::chrono::milliseconds(1);
  REQUIRE(q.Submit("gen", std::move(o), r.Start(), r.Drop()).ok());
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());
  q.Tick();
  CHECK(r.dropped == std::vector<ErrorCode>{ErrorCode::kQueueTimeout});
  CHECK(q.waiting() == 1);
  CHECK(q.totals().timed_out == 1);
}

TEST_CASE("a waiting job past its request deadline leaves with TIMEOUT, not QUEUE_TIMEOUT",
          "[queue]") {
  JobQueue q(5, 1);
  Recorder r;
  REQUIRE(q.Submit("gen", Priority::kNormal, r.Start(), r.Drop()).ok());
  JobQueue::Options due;
  due.deadline = JobQueue::Clock::now() - std::chrono::milliseconds(1);  // both passed
  due.timeout_at = JobQueue::Clock::now() - std::chrono::milliseconds(1);
  due.timeout_s = 2.5;
  REQUIRE(q.Submit("gen", std::move(due), r.Start(), r.Drop()).ok());
  JobQueue::Options later;
  later.timeout_at = JobQueue::Clock::now() + std::chrono::hours(1);
  REQUIRE(q.Submit("gen", std::move(later), r.Start(), r.Drop()).ok());
  std::string message;
  JobQueue::Options watched;
  watched.timeout_at = JobQueue::Clock::now() - std::chrono::milliseconds(1);
  watched.timeout_s = 2.5;
  REQUIRE(q.Submit("gen", std::move(watched), r.Start(), [&](const Error& e) {
             message = e.message;
           }).ok());
  q.Tick();
  CHECK(r.dropped == std::vector<ErrorCode>{ErrorCode::kTimeout});
  CHECK_THAT(message, Catch::Contains("timeout_s of 2.5 s"));
  CHECK(q.waiting() == 1);  // the one whose deadline is an hour away
}

TEST_CASE("aging lifts a low-priority job so it is never starved", "[queue]") {
  JobQueue q(10, 1, /*aging_s=*/0.05);
  Recorder r;
  auto running = q.Submit("gen", Priority::kHigh, r.Start(), r.Drop());
  auto low = q.Submit("gen", Priority::kLow, r.Start(), r.Drop());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // two aging steps: low -> high
  auto high = q.Submit("gen", Priority::kHigh, r.Start(), r.Drop());
  q.Tick();
  QueueInfo info = q.Describe();
  REQUIRE(info.waiting.size() == 2);
  CHECK(info.waiting[0].job == *low);  // aged into high, and it arrived first
  CHECK(info.waiting[1].job == *high);
  q.Finish(*running, JobQueue::Outcome::kCompleted);
  CHECK(r.started.back() == *low);
}

}  // namespace medq::daemon
