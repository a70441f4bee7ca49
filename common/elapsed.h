// Milliseconds between steady_clock points, as the protocol's timings and the
// metrics report them.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace medq {

inline double MsBetween(std::chrono::steady_clock::time_point from,
                        std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double MsSince(std::chrono::steady_clock::time_point from) {
  return MsBetween(from, std::chrono::steady_clock::now());
}

// Now, in seconds since the epoch: the wall-clock times the job store
// records (created_at, finished_at) and what they are compared with.
inline double EpochSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A duration in seconds for a message: "2.5", "300", "0.001".
inline std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

}  // namespace medq
