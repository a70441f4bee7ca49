// The wait estimate behind retry_after_s, Retry-After and estimated_wait_s
// (daemon/loop/wait_estimate.h), alone and as the job queue feeds it.
#include "daemon/loop/wait_estimate.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "daemon/loop/job_queue.h"

namespace medq::daemon {
namespace {

JobQueue::Options WithTokens(int64_t tokens) {
  JobQueue::Options options;
  options.tokens = tokens;
  return options;
}

// Submits a job of `tokens` tokens that nothing ends but the test.
std::string Submit(JobQueue& q, int64_t tokens) {
  auto id = q.Submit(
      "generate", WithTokens(tokens), [](const std::string&) {}, [](const Error&) {});
  REQUIRE(id.ok());
  return *id;
}

}  // namespace

TEST_CASE("the wait is the tokens ahead over the decode rate", "[queue][estimate]") {
  WaitEstimator e;
  // Before any measurement: the default rate.
  CHECK(e.tokens_per_s() == kDefaultTokensPerS);
  CHECK(e.WaitS(200, 0, 1) == Approx(200 / kDefaultTokensPerS));
  // A generation of 101 tokens whose last came 2 s after its first: 50/s.
  e.ObserveDecode(101, 2.0);
  CHECK(e.tokens_per_s() == Approx(50));
  CHECK(e.WaitS(500, 0, 1) == Approx(10));
  // Slots decoding at once share the work.
  CHECK(e.WaitS(500, 0, 4) == Approx(2.5));
  // Later generations move the average towards them, not onto them.
  e.ObserveDecode(101, 1.0);  // 100/s
  CHECK(e.tokens_per_s() > 50);
  CHECK(e.tokens_per_s() < 100);
  for (int i = 0; i < 30; ++i)
    e.ObserveDecode(101, 1.0);
  CHECK(e.tokens_per_s() == Approx(100).epsilon(0.01));
}

TEST_CASE("a generation that says nothing about a rate is not measured", "[queue][estimate]") {
  WaitEstimator e;
  e.ObserveDecode(1, 0.5);  // one token: no time between tokens
  e.ObserveDecode(0, 0);
  e.ObserveDecode(50, 0);  // no decode time
  e.ObserveDecode(50, -1);
  e.ObserveDecode(50, std::numeric_limits<double>::infinity());
  e.ObserveDecode(50, std::numeric_limits<double>::quiet_NaN());
  CHECK(e.tokens_per_s() == kDefaultTokensPerS);
}

TEST_CASE("jobs without tokens count their run time", "[queue][estimate]") {
  WaitEstimator e;
  CHECK(e.WaitS(0, 3, 1) == Approx(3));  // 1 s a job until measured
  e.ObserveRun(4);
  CHECK(e.WaitS(0, 3, 1) == Approx(12));
  CHECK(e.WaitS(0, 3, 2) == Approx(6));
  // Both kinds add up.
  CHECK(e.WaitS(static_cast<int64_t>(kDefaultTokensPerS) * 2, 1, 1) == Approx(6));
  CHECK(e.WaitS(-5, -1, 0) == 0);
}

TEST_CASE("a live rate counts only until a rate is measured", "[queue][estimate]") {
  WaitEstimator e;
  CHECK(e.tokens_per_s(0) == kDefaultTokensPerS);
  CHECK(e.tokens_per_s(500) == 500);
  CHECK(e.WaitS(1000, 0, 1, 500) == Approx(2));
  e.ObserveDecode(51, 1.0);
  CHECK(e.tokens_per_s(500) == Approx(50));
}

TEST_CASE("a retry hint is whole seconds between its bounds", "[queue][estimate]") {
  CHECK(RetryAfterS(0) == kMinRetryAfterS);
  CHECK(RetryAfterS(-3) == kMinRetryAfterS);
  CHECK(RetryAfterS(0.2) == 1);
  CHECK(RetryAfterS(7.01) == 8);
  CHECK(RetryAfterS(1e9) == kMaxRetryAfterS);
  CHECK(RetryAfterS(std::numeric_limits<double>::infinity()) == kMaxRetryAfterS);
  CHECK(RetryAfterS(std::numeric_limits<double>::quiet_NaN()) == kMaxRetryAfterS);
}

TEST_CASE("a full queue's retry hint counts the tokens queued and still to run",
          "[queue][estimate]") {
  JobQueue q(2, 1);
  q.ObserveDecode(101, 1.0);  // 100 tokens/s
  const std::string running = Submit(q, 400);
  Submit(q, 200);  // waits 1
  Submit(q, 300);  // waits 2
  // Ahead of a new request: 400 + 200 + 300 tokens, 9 s.
  auto full = q.Submit(
      "generate", WithTokens(50), [](const std::string&) {}, [](const Error&) {});
  REQUIRE_FALSE(full.ok());
  CHECK(full.error().code == ErrorCode::kQueueFull);
  REQUIRE(full.error().retry_after_s.has_value());
  CHECK(*full.error().retry_after_s == 9);
  // The running job has produced 250 of its tokens: 6.5 s are left, 7 as a hint.
  q.AddProgress(running, 250);
  CHECK(q.EstimatedWaitS(3) == Approx(6.5));
  CHECK(*q.CheckRoom().error().retry_after_s == 7);
  // A waiting job's estimate counts only the jobs ahead of it.
  CHECK(q.EstimatedWaitS(1) == Approx(1.5));
  CHECK(q.EstimatedWaitS(2) == Approx(3.5));
  // Progress past max_tokens counts as done; progress of a job not running
  // is ignored.
  q.AddProgress(running, 1000);
  q.AddProgress("j99", 1000);
  CHECK(q.EstimatedWaitS(3) == Approx(5));
}

TEST_CASE("before a generation has finished, the running ones' rate so far counts",
          "[queue][estimate]") {
  JobQueue q(5, 1);
  const std::string running = Submit(q, 1000);
  Submit(q, 1000);
  // No token yet: the default rate.
  CHECK(q.EstimatedWaitS(2) == Approx(2000 / kDefaultTokensPerS));
  // 101 tokens in about 50 ms: far faster than the default.
  q.AddProgress(running, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  q.AddProgress(running, 100);
  CHECK(q.EstimatedWaitS(2) < 1899 / kDefaultTokensPerS / 10);
  // A finished generation's rate takes over.
  q.ObserveDecode(11, 1.0);  // 10 tokens/s
  CHECK(q.EstimatedWaitS(2) == Approx(189.9));
}

TEST_CASE("a huge queue's retry hint is capped", "[queue][estimate]") {
  JobQueue q(1, 1);
  Submit(q, 1 << 20);
  Submit(q, 1 << 20);
  Status room = q.CheckRoom();
  REQUIRE_FALSE(room.ok());
  CHECK(*room.error().retry_after_s == kMaxRetryAfterS);
}

}  // namespace medq::daemon
