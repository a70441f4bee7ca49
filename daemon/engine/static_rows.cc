#include "daemon/engine/static_rows.h"

#include <vector>

#include "daemon/engine/attention.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"

namespace medq::engine {
namespace {

// Row i's mask over its cache's slots: [1, capacity], true where the key may
// be seen. Built once a step, shared by every layer.
at::Tensor SlotMask(const ModelConfig& c, const at::Tensor& position, int64_t capacity) {
  const at::Tensor slots = at::arange(capacity, position.options());
  at::Tensor mask = slots.le(position);
  if (c.sliding_window) mask = mask.logical_and((position - slots).lt(*c.sliding_window));
  return mask.view({1, capacity});
}

}  // namespace

at::Tensor StaticRows(const Model& m, const StaticStepInputs& in,
                      std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(caches.size());
  at::Tensor x = at::embedding(m.weights.embed, in.ids.view({n, 1})).to(m.compute_dtype);
  // [N, 1, 1, D]: row i's cos and sin at its own position, over its heads.
  const int64_t d = c.head_dim;
  const at::Tensor cos_rows = in.cos.index_select(0, in.positions).view({n, 1, 1, d});
  const at::Tensor sin_rows = in.sin.index_select(0, in.positions).view({n, 1, 1, d});
  std::vector<at::Tensor> positions, masks;
  for (int64_t i = 0; i < n; ++i) {
    positions.push_back(in.positions.narrow(0, i, 1));
    masks.push_back(SlotMask(c, positions.back(), caches[static_cast<size_t>(i)]->capacity()));
  }
  std::vector<at::Tensor> out(static_cast<size_t>(n));
  for (size_t layer = 0; layer < m.weights.layers.size(); ++layer) {
    const LayerWeights& l = m.weights.layers[layer];
    const at::Tensor h = RmsNorm(x, l.input_norm, c.rms_norm_eps);
    const at::Tensor qkv = Linear(h, l.qkv_proj, l.qkv_bias);  // [N, 1, q_out + 2 * kv_out]
    const HeadsQkv heads = RotateQkv(m, l, qkv, cos_rows, sin_rows);
    for (size_t i = 0; i < out.size(); ++i) {
      const auto row = [&](const at::Tensor& t) {
        return n == 1 ? t : t.narrow(0, static_cast<int64_t>(i), 1);
      };
      KvCache& cache = *caches[i];
      at::Tensor& keys = cache.keys(layer);  // [1, kv_heads, capacity, D]
      at::Tensor& values = cache.values(layer);
      keys.index_copy_(2, positions[i], row(heads.k));
      values.index_copy_(2, positions[i], row(heads.v));
      out[i] = AttendOneQuery(row(heads.q), keys, values, masks[i]);  // [1, 1, heads * D]
    }
    LinearAddInto(x, n == 1 ? out[0] : at::cat(out, 0), l.o_proj, l.o_bias);
    MlpBlock(c, l, x);
  }
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head).to(at::kFloat).view({n, -1});
}

}  // namespace medq::engine
