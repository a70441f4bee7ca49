#include "daemon/engine/batch_forward.h"

#include <vector>

#include "daemon/engine/attention.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"
#include "daemon/engine/quantized_embeddings.h"

namespace medq::engine {
namespace {

// The LibTorch path: transformer.cc's layer with the projections, q/k norms
// and RoPE over all N rows ([N, 1, width]; each row's cos and sin at its own
// position), and the cache write and attention once per sequence, each on
// its own cache and attention plan. Every op is a launch on a GPU, where a
// decode step is bound by the launches: the shared RoPE takes its handful
// of ops once a layer instead of once a sequence and layer (H100,
// SmolLM-135M bf16, medians of four runs: four sequences 8.5 ms a step
// against 12.5, eight 14.7 against 21.1; bench/engine/README.md).
at::Tensor GenericRows(const Model& m, std::span<const int64_t> ids,
                       std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(caches.size());
  const at::Tensor input = at::tensor(at::ArrayRef<int64_t>(ids.data(), ids.size()), at::kLong);
  at::Tensor x = EmbedTokens(m, input.view({n, 1}));  // [N, 1, hidden]
  std::vector<at::Tensor> cos, sin;
  std::vector<AttentionPlan> plans;
  for (KvCache* cache : caches) {
    const int64_t p = cache->length();
    cos.push_back(cache->cos().narrow(0, p, 1));
    sin.push_back(cache->sin().narrow(0, p, 1));
    plans.push_back(PlanAttention(p, 1, c.sliding_window, m.device));
  }
  // [N, 1, 1, D]: row i's position, broadcast over its heads.
  const at::Tensor cos_rows = n == 1 ? cos[0] : at::cat(cos, 0).view({n, 1, 1, -1});
  const at::Tensor sin_rows = n == 1 ? sin[0] : at::cat(sin, 0).view({n, 1, 1, -1});
  std::vector<at::Tensor> out(static_cast<size_t>(n));
  for (size_t layer = 0; layer < m.weights.layers.size(); ++layer) {
    const LayerWeights& l = m.weights.layers[layer];
    const at::Tensor h = RmsNorm(x, l.input_norm, c.rms_norm_eps);
    const at::Tensor qkv =
        Linear(h, l.qkv_proj, l.qkv_bias, l.qkv_scale);  // [N, 1, q_out + 2 * kv_out]
    const HeadsQkv heads = RotateQkv(m, l, qkv, cos_rows, sin_rows);
    for (size_t i = 0; i < out.size(); ++i) {
      // One sequence takes the heads as they are: no views to dispatch.
      const auto row = [&](const at::Tensor& t) {
        return n == 1 ? t : t.narrow(0, static_cast<int64_t>(i), 1);
      };
      out[i] =
          AttendCached(m, layer, {row(heads.q), row(heads.k), row(heads.v)}, caches[i], plans[i]);
    }
    LinearAddInto(x, n == 1 ? out[0] : at::cat(out, 0), l.o_proj, l.o_bias, l.o_scale);
    MlpBlock(c, l, x);
  }
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head, at::Tensor(), m.weights.lm_head_scale)
      .to(at::kFloat)
      .view({n, -1});
}

}  // namespace

at::Tensor ForwardRows(const Model& m, std::span<const int64_t> ids,
                       std::span<KvCache* const> caches) {
  at::Tensor logits =
      CpuDecodeRowsApply(m) ? CpuDecodeRows(m, ids, caches) : GenericRows(m, ids, caches);
  for (KvCache* cache : caches)
    cache->Advance(1);
  return logits;
}

}  // namespace medq::engine
