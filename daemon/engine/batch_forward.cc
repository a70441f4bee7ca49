#include "daemon/engine/batch_forward.h"

#include <vector>

#include "daemon/engine/attention.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"

namespace medq::engine {
namespace {

// The LibTorch path: transformer.cc's layer with the projections over all N
// rows ([N, 1, width]) and SelfAttention once per sequence, each on its own
// row of qkv, its own cache, RoPE rows and attention plan.
at::Tensor GenericRows(const Model& m, std::span<const int64_t> ids, const at::Tensor& device_ids,
                       std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(caches.size());
  const at::Tensor input =
      device_ids.defined() ? device_ids
                           : at::tensor(at::ArrayRef<int64_t>(ids.data(), ids.size()), at::kLong);
  at::Tensor x = at::embedding(m.weights.embed, input.to(m.device, at::kLong).view({n, 1}))
                     .to(m.compute_dtype);  // [N, 1, hidden]
  std::vector<at::Tensor> cos, sin;
  std::vector<AttentionPlan> plans;
  for (KvCache* cache : caches) {
    const int64_t p = cache->length();
    cos.push_back(cache->cos().narrow(0, p, 1));
    sin.push_back(cache->sin().narrow(0, p, 1));
    plans.push_back(PlanAttention(p, 1, c.sliding_window, m.device));
  }
  std::vector<at::Tensor> out(static_cast<size_t>(n));
  for (size_t layer = 0; layer < m.weights.layers.size(); ++layer) {
    const LayerWeights& l = m.weights.layers[layer];
    const at::Tensor h = RmsNorm(x, l.input_norm, c.rms_norm_eps);
    const at::Tensor qkv = Linear(h, l.qkv_proj, l.qkv_bias);  // [N, 1, q_out + 2 * kv_out]
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = SelfAttention(m, l, layer, qkv.narrow(0, static_cast<int64_t>(i), 1), caches[i],
                             cos[i], sin[i], plans[i]);
    }
    LinearAddInto(x, n == 1 ? out[0] : at::cat(out, 0), l.o_proj, l.o_bias);
    MlpBlock(c, l, x);
  }
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head).to(at::kFloat).view({n, -1});
}

}  // namespace

at::Tensor ForwardRows(const Model& m, std::span<const int64_t> ids, const at::Tensor& device_ids,
                       std::span<KvCache* const> caches) {
  at::Tensor logits = CpuDecodeRowsApply(m) ? CpuDecodeRows(m, ids, caches)
                                            : GenericRows(m, ids, device_ids, caches);
  for (KvCache* cache : caches)
    cache->Advance(1);
  return logits;
}

}  // namespace medq::engine
