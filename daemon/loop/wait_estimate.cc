#include "daemon/loop/wait_estimate.h"

#include <algorithm>
#include <cmath>

namespace medq::daemon {
namespace {

// The weight of the newest measurement: recent jobs count most (a model
// switch or a busier GPU shows within a few jobs), one odd job does not
// swing the estimate.
constexpr double kNewest = 0.3;

double Average(double old_value, double sample) {
  return old_value > 0 ? (1 - kNewest) * old_value + kNewest * sample : sample;
}

}  // namespace

void WaitEstimator::ObserveDecode(int64_t tokens, double decode_s) {
  // decode_s runs from the first token to the last: it covers the others.
  if (tokens < 2 || !(decode_s > 0) || !std::isfinite(decode_s)) return;
  tokens_per_s_ = Average(tokens_per_s_, static_cast<double>(tokens - 1) / decode_s);
}

void WaitEstimator::ObserveRun(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  run_s_ = Average(run_s_, seconds);
}

double WaitEstimator::WaitS(int64_t tokens_ahead, int64_t jobs_ahead, int slots,
                            double live) const {
  const double parallel = std::max(1, slots);
  const double tokens_s =
      static_cast<double>(std::max<int64_t>(0, tokens_ahead)) / tokens_per_s(live);
  const double jobs_s = static_cast<double>(std::max<int64_t>(0, jobs_ahead)) * run_s();
  return (tokens_s + jobs_s) / parallel;
}

double RetryAfterS(double wait_s) {
  if (std::isnan(wait_s)) return kMaxRetryAfterS;
  return std::clamp(std::ceil(wait_s), kMinRetryAfterS, kMaxRetryAfterS);
}

}  // namespace medq::daemon
