// A circuit breaker per model: a model whose device keeps failing stops
// taking work for a while instead of failing every request. Loop thread only.
//
// States, per model:
//   closed     work is admitted; `threshold` device errors in a row (a
//              generation or embed request ending INTERNAL) open it;
//   open       for `cooldown_s`, every new request for the model is refused
//              with NOT_READY and retry_after_s (the cool-down left);
//   half_open  after the cool-down, one request is admitted as the probe;
//              others are refused (retry_after_s: the cool-down) until it
//              ends: a success closes the breaker, a device error opens it
//              again for another cool-down, any other end (cancelled,
//              refused, timed out) lets the next request be the probe.
// A success in any state resets the count. Errors of the request itself
// (INVALID_REQUEST, GPU_OOM, CANCELLED, ...) neither count nor reset: they
// say nothing about the device. `threshold` 0 turns the breaker off.
//
// Every admitted request gets a Ticket and ends it exactly once with its
// outcome (Settle); a ticket dropped unsettled counts as "other", so that a
// probe lost on an error path never wedges its model half open. Tickets hold
// the breaker weakly: one that outlives it (at shutdown) settles nothing.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/messages.h"
#include "common/result.h"

namespace medq::daemon {

class CircuitBreaker : public std::enable_shared_from_this<CircuitBreaker> {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Outcome { kSuccess, kDeviceError, kOther };

  class Ticket {
   public:
    Ticket(std::weak_ptr<CircuitBreaker> breaker, std::string model, bool probe)
        : breaker_(std::move(breaker)), model_(std::move(model)), probe_(probe) {}
    ~Ticket() { Settle(Outcome::kOther); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // The request's end; later calls are no-ops.
    void Settle(Outcome outcome, const std::string& error = "",
                Clock::time_point now = Clock::now());
    bool probe() const { return probe_; }

   private:
    std::weak_ptr<CircuitBreaker> breaker_;  // empty once settled
    std::string model_;
    bool probe_;
  };

  CircuitBreaker(int threshold, double cooldown_s)
      : threshold_(threshold), cooldown_s_(cooldown_s) {}

  // Before a request for `model` is accepted: its ticket, or NOT_READY with
  // retry_after_s while the breaker is open or its probe runs. The breaker
  // is owned by a shared_ptr.
  Result<std::shared_ptr<Ticket>> Admit(const std::string& model, Clock::time_point now);
  Result<std::shared_ptr<Ticket>> Admit(const std::string& model) {
    return Admit(model, Clock::now());
  }

  // For health: every model whose breaker is not closed, or that has device
  // errors counted.
  std::vector<BreakerInfo> Describe(Clock::time_point now) const;
  // True while any model's breaker is open or half open.
  bool AnyTripped() const;

 private:
  struct State {
    int errors = 0;  // device errors in a row
    bool open = false;
    Clock::time_point open_until{};
    bool probe_running = false;
    int trips = 0;
    std::string last_error;
  };

  void Record(const std::string& model, bool probe, Outcome outcome, const std::string& error,
              Clock::time_point now);
  bool HalfOpen(const State& st, Clock::time_point now) const {
    return st.open && now >= st.open_until;
  }

  int threshold_;
  double cooldown_s_;
  std::map<std::string, State> models_;
};

}  // namespace medq::daemon
