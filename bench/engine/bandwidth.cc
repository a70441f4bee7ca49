#include "bench/engine/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace medq::bench {

double MeasureReadBandwidth(int threads, size_t bytes) {
  threads = std::max(1, threads);
  const size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i)
    buf[i] = i * 2654435761u;  // touch every page
  double best = 0;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (int pass = 0; pass < 4; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t end = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i = begin;
        for (; i + 4 <= end; i += 4) {
          s0 += buf[i];
          s1 += buf[i + 1];
          s2 += buf[i + 2];
          s3 += buf[i + 3];
        }
        for (; i < end; ++i)
          s0 += buf[i];
        sums[static_cast<size_t>(t)] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& th : pool)
      th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s);
  }
  // Keep the sums observable so the loads are not optimised away.
  volatile uint64_t sink = 0;
  for (uint64_t s : sums)
    sink = sink + s;
  (void)sink;
  return best;
}

}  // namespace medq::bench
