// The machine's memory read bandwidth, the bound on CPU decode speed.
#pragma once

#include <cstddef>

namespace medq::bench {

// Bytes per second read by `threads` threads summing a `bytes`-sized buffer
// (far larger than the caches); the best of a few passes.
double MeasureReadBandwidth(int threads, size_t bytes);

}  // namespace medq::bench
