// Milliseconds between steady_clock points, as the protocol's timings and the
// metrics report them.
#pragma once

#include <chrono>

namespace medq {

inline double MsBetween(std::chrono::steady_clock::time_point from,
                        std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double MsSince(std::chrono::steady_clock::time_point from) {
  return MsBetween(from, std::chrono::steady_clock::now());
}

}  // namespace medq
