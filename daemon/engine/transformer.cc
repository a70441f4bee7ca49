#include "daemon/engine/transformer.h"

#include "daemon/engine/attention.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/rope.h"

namespace medq::engine {
namespace {

// transformers' LlamaRMSNorm: normalise in float32, cast back, then scale.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  return (xf * xf.pow(2).mean(-1, true).add_(eps).rsqrt_()).to(x.scalar_type()).mul_(weight);
}

at::Tensor AttentionBlock(const Model& m, const LayerWeights& l, size_t layer_index,
                          const at::Tensor& h, KvCache& cache, const at::Tensor& cos,
                          const at::Tensor& sin, const std::optional<at::Tensor>& mask) {
  const ModelConfig& c = m.config;
  const int64_t b = h.size(0), t = h.size(1), start = cache.length();
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
  at::Tensor& keys = cache.keys(layer_index);
  at::Tensor& values = cache.values(layer_index);
  keys.narrow(2, start, t).copy_(k);
  values.narrow(2, start, t).copy_(v.transpose(1, 2));
  const at::Tensor out =
      Attention(q, keys.narrow(2, 0, start + t), values.narrow(2, 0, start + t), mask);
  return Linear(out.transpose(1, 2).reshape({b, t, c.num_heads * c.head_dim}), l.o_proj, l.o_bias);
}

at::Tensor MlpBlock(const LayerWeights& l, const at::Tensor& h) {
  const at::Tensor gate_up = Linear(h, l.gate_up_proj, l.gate_up_bias);  // [B, T, 2 * inter]
  const int64_t inter = l.gate_up_proj.size(0) / 2;
  const at::Tensor act =
      at::silu(gate_up.narrow(-1, 0, inter)).mul_(gate_up.narrow(-1, inter, inter));
  return Linear(act, l.down_proj, l.down_bias);
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
    x.add_(
        AttentionBlock(m, l, i, RmsNorm(x, l.input_norm, c.rms_norm_eps), cache, cos, sin, mask));
    x.add_(MlpBlock(l, RmsNorm(x, l.post_norm, c.rms_norm_eps)));
  }
  cache.Advance(t);
  if (which == LogitsFor::kLastPosition) x = x.narrow(1, t - 1, 1).contiguous();
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return Linear(x, m.weights.lm_head).to(at::kFloat);
}

}  // namespace medq::engine
