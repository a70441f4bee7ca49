#include "daemon/engine/transformer.h"

#include "daemon/engine/attention.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/rope.h"

namespace medq::engine {
namespace {

// Inference updates activations in place to save an allocation per op; under
// grad mode (the demo model's trainer) autograd needs every op's inputs
// intact, so the same arithmetic runs out of place. Both give equal values.
bool InPlace() {
  return !at::GradMode::is_enabled();
}

at::Tensor Mul(at::Tensor a, const at::Tensor& b) {
  return InPlace() ? a.mul_(b) : a * b;
}
at::Tensor Add(at::Tensor a, const at::Tensor& b) {
  return InPlace() ? a.add_(b) : a + b;
}

// transformers' LlamaRMSNorm: normalise in float32, cast back, then scale.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  return Mul((xf * xf.pow(2).mean(-1, true).add(eps).rsqrt()).to(x.scalar_type()), weight);
}

// Keys and values of one layer for the attention of the current positions:
// the cache's (written in place) during inference, or this pass's own when
// there is no cache (a whole sequence from position 0, for training).
struct LayerKv {
  at::Tensor keys, values;  // [B, kv_heads, S, D]
};

LayerKv StoreKv(KvCache* cache, size_t layer_index, const at::Tensor& k, const at::Tensor& v) {
  if (cache == nullptr) return {k, v};
  const int64_t start = cache->length(), t = k.size(2);
  at::Tensor& keys = cache->keys(layer_index);
  at::Tensor& values = cache->values(layer_index);
  keys.narrow(2, start, t).copy_(k);
  values.narrow(2, start, t).copy_(v);
  return {keys.narrow(2, 0, start + t), values.narrow(2, 0, start + t)};
}

at::Tensor AttentionBlock(const Model& m, const LayerWeights& l, size_t layer_index,
                          const at::Tensor& h, KvCache* cache, const at::Tensor& cos,
                          const at::Tensor& sin, const std::optional<at::Tensor>& mask) {
  const ModelConfig& c = m.config;
  const int64_t b = h.size(0), t = h.size(1);
  // [B, T, heads * D] -> [B, heads, T, D]
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  const at::Tensor qkv = Linear(h, l.qkv_proj, l.qkv_bias);  // [B, T, q_out + 2 * kv_out]
  at::Tensor q = qkv.narrow(-1, 0, q_out).view({b, t, c.num_heads, c.head_dim});
  at::Tensor k = qkv.narrow(-1, q_out, kv_out).view({b, t, c.num_kv_heads, c.head_dim});
  const at::Tensor v =
      qkv.narrow(-1, q_out + kv_out, kv_out).view({b, t, c.num_kv_heads, c.head_dim});
  if (c.qk_norm) {
    q = RmsNorm(q, l.q_norm, c.rms_norm_eps);
    k = RmsNorm(k, l.k_norm, c.rms_norm_eps);
  }
  q = ApplyRope(q.transpose(1, 2), cos, sin);
  k = ApplyRope(k.transpose(1, 2), cos, sin);
  const LayerKv kv = StoreKv(cache, layer_index, k, v.transpose(1, 2));
  const at::Tensor out = Attention(q, kv.keys, kv.values, mask);
  return Linear(out.transpose(1, 2).reshape({b, t, c.num_heads * c.head_dim}), l.o_proj, l.o_bias);
}

at::Tensor MlpBlock(const LayerWeights& l, const at::Tensor& h) {
  const at::Tensor gate_up = Linear(h, l.gate_up_proj, l.gate_up_bias);  // [B, T, 2 * inter]
  const int64_t inter = l.gate_up_proj.size(0) / 2;
  const at::Tensor act =
      Mul(at::silu(gate_up.narrow(-1, 0, inter)), gate_up.narrow(-1, inter, inter));
  return Linear(act, l.down_proj, l.down_bias);
}

// The decoder stack over ids at positions start .. start + T - 1, then the
// final norm and lm_head.
at::Tensor Decode(const Model& m, const at::Tensor& ids, KvCache* cache, int64_t start,
                  const at::Tensor& cos, const at::Tensor& sin, LogitsFor which) {
  const ModelConfig& c = m.config;
  const int64_t t = ids.size(1);
  at::Tensor x = at::embedding(m.weights.embed, ids.to(m.device, at::kLong)).to(m.compute_dtype);
  const auto mask = AttentionMask(start, t, c.sliding_window, m.device);
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    x = Add(x, AttentionBlock(m, l, i, RmsNorm(x, l.input_norm, c.rms_norm_eps), cache, cos, sin,
                              mask));
    x = Add(x, MlpBlock(l, RmsNorm(x, l.post_norm, c.rms_norm_eps)));
  }
  if (which == LogitsFor::kLastPosition) x = x.narrow(1, t - 1, 1).contiguous();
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head).to(at::kFloat);
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
