#include "bench/kernels/attention_sweep.h"

#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <vector>

#include "bench/kernels/model_shapes.h"
#include "daemon/engine/kernels/cpu_attention.h"

namespace medq::bench {
namespace {

using nlohmann::json;

// One row's buffers for one layer: its query, cache and output.
struct RowLayer {
  torch::Tensor q, keys, values, out;
};

json Case(const TimingOptions& timing, const ModelShape& m, int64_t rows, int64_t context) {
  torch::manual_seed(7);
  const int64_t d = m.head_dim;
  const int64_t cache = m.kv_heads * context * d;
  // [layer][row]
  std::vector<std::vector<RowLayer>> state(static_cast<size_t>(m.layers));
  for (auto& layer : state) {
    for (int64_t r = 0; r < rows; ++r) {
      layer.push_back({torch::randn({m.heads * d}), torch::randn({cache}), torch::randn({cache}),
                       torch::empty({m.heads * d})});
    }
  }
  std::vector<engine::kernels::CachedAttention> calls;
  const std::vector<double> seconds = SecondsPerCall(timing, [&](int64_t) {
    for (std::vector<RowLayer>& layer : state) {
      calls.clear();
      for (RowLayer& row : layer) {
        engine::kernels::CachedAttention a;
        a.q = row.q.data_ptr<float>();
        a.keys = row.keys.data_ptr<float>();
        a.values = row.values.data_ptr<float>();
        a.heads = m.heads;
        a.kv_heads = m.kv_heads;
        a.capacity = context;
        a.head_dim = d;
        a.begin = 0;
        a.end = context;
        a.out = row.out.data_ptr<float>();
        calls.push_back(a);
      }
      engine::kernels::CpuCachedAttention(calls);
    }
  });
  std::vector<double> ms;
  for (double s : seconds)
    ms.push_back(s * 1e3);
  const double bytes =
      2.0 * static_cast<double>(cache) * sizeof(float) * static_cast<double>(m.layers * rows);
  return {{"model", m.name},
          {"rows", rows},
          {"context", context},
          {"cache_mb_per_step", bytes / 1e6},
          {"step_ms", Summary(ms)}};
}

}  // namespace

json AttentionSweep(const TimingOptions& timing) {
  json cases = json::array();
  for (const ModelShape& m : BenchModels()) {
    for (const int64_t context : {64, 512}) {
      for (const int64_t rows : {1, 4}) {
        std::cerr << "attention " << m.name << " rows " << rows << " context " << context << "\n";
        cases.push_back(Case(timing, m, rows, context));
      }
    }
  }
  return cases;
}

}  // namespace medq::bench
