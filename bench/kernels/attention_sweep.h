// kernels_bench's attention section: the CPU decode step's attention
// (CpuCachedAttention) alone, over every layer of a model shape.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/kernels/timing.h"

namespace medq::bench {

// For each model shape of BenchModels(), `rows` sequences of 1 and 4 and
// cached contexts of 64 and 512 positions: ms per decode step of attention
// alone (one CpuCachedAttention call per layer for all rows, each layer and
// row with a float32 KV cache of its own, as a batched step reads them), and
// the cache bytes a step reads.
nlohmann::json AttentionSweep(const TimingOptions& timing);

}  // namespace medq::bench
