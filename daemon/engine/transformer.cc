#include "daemon/engine/transformer.h"

#include "daemon/engine/attention.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"
#include "daemon/engine/quantized_embeddings.h"
#include "daemon/engine/rope.h"

namespace medq::engine {
namespace {

// x += o_proj(attention(input_norm(x))).
void AttentionBlock(const Model& m, const LayerWeights& l, size_t layer_index, at::Tensor& x,
                    KvCache* cache, const at::Tensor& cos, const at::Tensor& sin,
                    const AttentionPlan& plan) {
  const at::Tensor h = RmsNorm(x, l.input_norm, m.config.rms_norm_eps);
  const at::Tensor qkv =
      Linear(h, l.qkv_proj, l.qkv_bias, l.qkv_scale);  // [B, T, q_out + 2 * kv_out]
  LinearAddInto(x, SelfAttention(m, l, layer_index, qkv, cache, cos, sin, plan), l.o_proj, l.o_bias,
                l.o_scale);
}

// The decoder stack over ids at positions start .. start + T - 1, then the
// final norm and lm_head.
at::Tensor Decode(const Model& m, const at::Tensor& ids, KvCache* cache, int64_t start,
                  const at::Tensor& cos, const at::Tensor& sin, LogitsFor which) {
  const ModelConfig& c = m.config;
  const int64_t t = ids.size(1);
  at::Tensor x = EmbedTokens(m, ids);
  const AttentionPlan plan = PlanAttention(start, t, c.sliding_window, m.device);
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    AttentionBlock(m, l, i, x, cache, cos, sin, plan);
    MlpBlock(c, l, x);
  }
  if (which == LogitsFor::kLastPosition) x = x.narrow(1, t - 1, 1).contiguous();
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head, at::Tensor(), m.weights.lm_head_scale).to(at::kFloat);
}

}  // namespace

at::Tensor Forward(const Model& m, const at::Tensor& ids, KvCache& cache, LogitsFor which) {
  if (ids.numel() == 1 && CpuDecodeStepApplies(m, cache)) {
    at::Tensor logits = CpuDecodeStep(m, ids.to(at::kLong).item<int64_t>(), cache);
    cache.Advance(1);
    return logits;
  }
  const int64_t t = ids.size(1), start = cache.length();
  const at::Tensor cos = cache.cos().narrow(0, start, t);
  const at::Tensor sin = cache.sin().narrow(0, start, t);
  at::Tensor logits = Decode(m, ids, &cache, start, cos, sin, which);
  cache.Advance(t);
  return logits;
}

at::Tensor ForwardSequence(const Model& m, const at::Tensor& ids) {
  at::Tensor cos, sin;
  RopeTables(m.inv_freq, ids.size(1), m.device, m.compute_dtype, &cos, &sin);
  return Decode(m, ids, nullptr, 0, cos, sin, LogitsFor::kAllPositions);
}

}  // namespace medq::engine
