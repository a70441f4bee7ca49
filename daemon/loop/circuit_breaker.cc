#include "daemon/loop/circuit_breaker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/elapsed.h"

namespace medq::daemon {
namespace {

double SecondsUntil(CircuitBreaker::Clock::time_point t, CircuitBreaker::Clock::time_point now) {
  return std::max(0.0, std::chrono::duration<double>(t - now).count());
}

}  // namespace

void CircuitBreaker::Ticket::Settle(Outcome outcome, const std::string& error,
                                    Clock::time_point now) {
  std::shared_ptr<CircuitBreaker> breaker = std::exchange(breaker_, {}).lock();
  if (breaker != nullptr) breaker->Record(model_, probe_, outcome, error, now);
}

Result<std::shared_ptr<CircuitBreaker::Ticket>> CircuitBreaker::Admit(const std::string& model,
                                                                      Clock::time_point now) {
  if (threshold_ <= 0)
    return std::make_shared<Ticket>(std::weak_ptr<CircuitBreaker>(), model, false);
  auto it = models_.find(model);
  if (it == models_.end() || !it->second.open) {
    return std::make_shared<Ticket>(weak_from_this(), model, false);
  }
  State& st = it->second;
  if (!HalfOpen(st, now)) {
    const double left = SecondsUntil(st.open_until, now);
    return Error(ErrorCode::kNotReady,
                 "model " + model + " is paused after " + std::to_string(st.errors) +
                     " device errors in a row (circuit breaker open; last: " + st.last_error +
                     "); retry in " + FormatSeconds(std::ceil(left)) + " s",
                 std::max(1.0, std::ceil(left)));
  }
  if (st.probe_running) {
    return Error(ErrorCode::kNotReady,
                 "model " + model +
                     " is being probed after device errors (circuit breaker half open); retry "
                     "shortly",
                 std::max(1.0, std::ceil(cooldown_s_)));
  }
  st.probe_running = true;
  spdlog::info("circuit breaker of model {}: half open, one request probes the device", model);
  return std::make_shared<Ticket>(weak_from_this(), model, true);
}

void CircuitBreaker::Record(const std::string& model, bool probe, Outcome outcome,
                            const std::string& error, Clock::time_point now) {
  auto it = models_.find(model);
  if (outcome == Outcome::kOther) {
    if (probe && it != models_.end()) it->second.probe_running = false;
    return;
  }
  if (outcome == Outcome::kSuccess) {
    if (it == models_.end()) return;
    if (it->second.open) spdlog::info("circuit breaker of model {}: closed again", model);
    models_.erase(it);
    return;
  }
  State& st = models_[model];
  if (probe) st.probe_running = false;
  ++st.errors;
  st.last_error = error;
  // A device error while open (a request admitted before it opened) does
  // not extend the cool-down; the probe's does.
  const bool trip = probe || (!st.open && st.errors >= threshold_);
  if (!trip) return;
  st.open = true;
  ++st.trips;
  st.open_until =
      now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cooldown_s_));
  spdlog::error(
      "circuit breaker of model {}: open for {} s after {} device error(s) in a row; last: {}",
      model, FormatSeconds(cooldown_s_), st.errors, error);
}

std::vector<BreakerInfo> CircuitBreaker::Describe(Clock::time_point now) const {
  std::vector<BreakerInfo> out;
  for (const auto& [model, st] : models_) {
    BreakerInfo info;
    info.model = model;
    info.state = !st.open ? "closed" : HalfOpen(st, now) ? "half_open" : "open";
    info.consecutive_errors = st.errors;
    info.trips = st.trips;
    if (st.open) info.retry_after_s = SecondsUntil(st.open_until, now);
    info.last_error = st.last_error;
    out.push_back(std::move(info));
  }
  return out;
}

bool CircuitBreaker::AnyTripped() const {
  return std::any_of(models_.begin(), models_.end(),
                     [](const auto& entry) { return entry.second.open; });
}

}  // namespace medq::daemon
