// Timing helpers for kernels_bench: repeat a call until a minimum time has
// passed, several times over, and summarize the repeats.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

namespace medq::bench {

struct TimingOptions {
  int repeats = 5;           // independent measurements, each reported
  double min_seconds = 0.1;  // each measurement loops at least this long
};

// Seconds per call, one value per repeat. call(i) gets a running call index,
// so that the caller can rotate through copies of its data (and so read from
// memory rather than from the caches). One untimed warm-up call comes first.
inline std::vector<double> SecondsPerCall(const TimingOptions& options,
                                          const std::function<void(int64_t)>& call) {
  using Clock = std::chrono::steady_clock;
  int64_t index = 0;
  call(index++);
  std::vector<double> result;
  for (int r = 0; r < options.repeats; ++r) {
    const Clock::time_point start = Clock::now();
    int64_t calls = 0;
    double elapsed = 0.0;
    do {
      call(index++);
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < options.min_seconds);
    result.push_back(elapsed / static_cast<double>(calls));
  }
  return result;
}

// {"median", "min", "max"} of values (sorted copy; the median of an even
// count is the mean of the middle two).
inline nlohmann::json Summary(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n == 0) return nullptr;
  const double median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return {{"median", median}, {"min", values.front()}, {"max", values.back()}};
}

// GB/s (1e9 bytes per second) for each timing of a call that reads `bytes`.
inline std::vector<double> GigabytesPerSecond(const std::vector<double>& seconds, double bytes) {
  std::vector<double> rates;
  rates.reserve(seconds.size());
  for (double s : seconds)
    rates.push_back(bytes / s / 1e9);
  return rates;
}

}  // namespace medq::bench
