#include "daemon/loop/circuit_breaker.h"

#include <catch2/catch.hpp>

namespace medq::daemon {
namespace {

using Clock = CircuitBreaker::Clock;
using Outcome = CircuitBreaker::Outcome;
using namespace std::chrono_literals;

std::shared_ptr<CircuitBreaker::Ticket> Admitted(CircuitBreaker& b, const std::string& model,
                                                 Clock::time_point now) {
  auto t = b.Admit(model, now);
  REQUIRE(t.ok());
  return *t;
}

void Fail(CircuitBreaker& b, const std::string& model, Clock::time_point now) {
  Admitted(b, model, now)->Settle(Outcome::kDeviceError, "illegal memory access", now);
}

}  // namespace

TEST_CASE("breaker: N device errors in a row pause the model, then one probe decides",
          "[breaker]") {
  auto b = std::make_shared<CircuitBreaker>(3, 10);
  const auto t0 = Clock::now();
  Fail(*b, "m", t0);
  Fail(*b, "m", t0);
  CHECK(!b->AnyTripped());
  CHECK(b->Admit("m", t0).ok());  // unsettled: counts as nothing
  Fail(*b, "m", t0);
  CHECK(b->AnyTripped());
  auto refused = b->Admit("m", t0 + 1s);
  REQUIRE(!refused.ok());
  CHECK(refused.error().code == ErrorCode::kNotReady);
  REQUIRE(refused.error().retry_after_s.has_value());
  CHECK(*refused.error().retry_after_s == Approx(9).margin(0.01));
  CHECK(b->Admit("other", t0 + 1s).ok());  // per model
  auto described = b->Describe(t0 + 1s);
  REQUIRE(described.size() == 1);
  CHECK(described[0].state == "open");
  CHECK(described[0].consecutive_errors == 3);
  CHECK(described[0].last_error == "illegal memory access");

  // After the cool-down: one probe, the rest wait for it.
  auto probe = Admitted(*b, "m", t0 + 11s);
  CHECK(probe->probe());
  CHECK(b->Describe(t0 + 11s)[0].state == "half_open");
  CHECK(!b->Admit("m", t0 + 11s).ok());
  probe->Settle(Outcome::kSuccess);
  CHECK(!b->AnyTripped());
  CHECK(b->Describe(t0 + 11s).empty());
  CHECK(b->Admit("m", t0 + 11s).ok());
}

TEST_CASE("breaker: a failed probe reopens, and a probe that ends otherwise lets another through",
          "[breaker]") {
  auto b = std::make_shared<CircuitBreaker>(1, 5);
  const auto t0 = Clock::now();
  Fail(*b, "m", t0);
  {
    auto probe = Admitted(*b, "m", t0 + 6s);
    REQUIRE(probe->probe());
    // Dropped unsettled (e.g. refused by a full queue): not a verdict.
  }
  auto probe = Admitted(*b, "m", t0 + 6s);
  REQUIRE(probe->probe());
  probe->Settle(Outcome::kDeviceError, "again", t0 + 6s);
  auto refused = b->Admit("m", t0 + 7s);
  REQUIRE(!refused.ok());
  CHECK(*refused.error().retry_after_s == Approx(4));  // a new cool-down, from the probe's end
  CHECK(b->Describe(t0 + 7s)[0].trips == 2);
}

TEST_CASE("breaker: a success resets the count, and threshold 0 never trips", "[breaker]") {
  auto b = std::make_shared<CircuitBreaker>(2, 5);
  const auto t0 = Clock::now();
  Fail(*b, "m", t0);
  Admitted(*b, "m", t0)->Settle(Outcome::kSuccess);
  Fail(*b, "m", t0);
  CHECK(!b->AnyTripped());
  Admitted(*b, "m", t0)->Settle(Outcome::kOther);  // neither counts nor resets
  Fail(*b, "m", t0);
  CHECK(b->AnyTripped());

  auto off = std::make_shared<CircuitBreaker>(0, 5);
  for (int i = 0; i < 10; ++i)
    Fail(*off, "m", t0);
  CHECK(!off->AnyTripped());
  CHECK(off->Admit("m", t0).ok());
}

}  // namespace medq::daemon
