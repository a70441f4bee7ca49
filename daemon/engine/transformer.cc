#include "daemon/engine/transformer.h"

#include "daemon/engine/attention.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/rope.h"

namespace medq::engine {
namespace {

// transformers' LlamaRMSNorm: normalise in float32, cast back, then scale.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor AttentionBlock(const Model& m, const LayerWeights& l, size_t layer_index,
                          const at::Tensor& h, KvCache& cache, const at::Tensor& cos,
                          const at::Tensor& sin, const std::optional<at::Tensor>& mask) {
  const ModelConfig& c = m.config;
  const int64_t b = h.size(0), t = h.size(1), start = cache.length();
  // [B, T, heads * D] -> [B, heads, T, D]
  at::Tensor q = Linear(h, l.q_proj, l.q_bias).view({b, t, c.num_heads, c.head_dim});
  at::Tensor k = Linear(h, l.k_proj, l.k_bias).view({b, t, c.num_kv_heads, c.head_dim});
  const at::Tensor v = Linear(h, l.v_proj, l.v_bias).view({b, t, c.num_kv_heads, c.head_dim});
  if (c.qk_norm) {
    q = RmsNorm(q, l.q_norm, c.rms_norm_eps);
    k = RmsNorm(k, l.k_norm, c.rms_norm_eps);
  }
  q = ApplyRope(q.transpose(1, 2), cos, sin);
  k = ApplyRope(k.transpose(1, 2), cos, sin);
  at::Tensor& keys = cache.keys(layer_index);
  at::Tensor& values = cache.values(layer_index);
  keys.narrow(2, start, t).copy_(k);
  values.narrow(2, start, t).copy_(v.transpose(1, 2));
  const at::Tensor out =
      Attention(q, keys.narrow(2, 0, start + t), values.narrow(2, 0, start + t), mask);
  return Linear(out.transpose(1, 2).reshape({b, t, c.num_heads * c.head_dim}), l.o_proj, l.o_bias);
}

at::Tensor MlpBlock(const LayerWeights& l, const at::Tensor& h) {
  const at::Tensor gate = at::silu(Linear(h, l.gate_proj, l.gate_bias));
  return Linear(gate * Linear(h, l.up_proj, l.up_bias), l.down_proj, l.down_bias);
}

}  // namespace

at::Tensor Forward(const Model& m, const at::Tensor& ids, KvCache& cache, LogitsFor which) {
  const ModelConfig& c = m.config;
  const int64_t t = ids.size(1), start = cache.length();
  at::Tensor x = at::embedding(m.weights.embed, ids.to(m.device, at::kLong)).to(m.compute_dtype);
  const at::Tensor cos = cache.cos().narrow(0, start, t);
  const at::Tensor sin = cache.sin().narrow(0, start, t);
  const auto mask = AttentionMask(start, t, c.sliding_window, m.device);
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    x = x +
        AttentionBlock(m, l, i, RmsNorm(x, l.input_norm, c.rms_norm_eps), cache, cos, sin, mask);
    x = x + MlpBlock(l, RmsNorm(x, l.post_norm, c.rms_norm_eps));
  }
  cache.Advance(t);
  if (which == LogitsFor::kLastPosition) x = x.narrow(1, t - 1, 1).contiguous();
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head).to(at::kFloat);
}

}  // namespace medq::engine
