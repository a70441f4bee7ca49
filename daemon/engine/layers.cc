#include "daemon/engine/layers.h"

#include "daemon/engine/fused_ops.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/rope.h"
#include "daemon/engine/torch_version.h"

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

}  // namespace

// transformers' LlamaRMSNorm: normalise in float32, cast back, then scale.
// LibTorch 2.4 and later have it as one op (the same steps, or a fused
// kernel on CUDA); before, it takes eight.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#if MEDQ_TORCH_AT_LEAST(2, 4)
  if (weight.scalar_type() == x.scalar_type()) {
    return at::rms_norm(x, {x.size(-1)}, weight, eps);
  }
#endif
  const bool wide = x.scalar_type() == at::kFloat;  // no casts to dispatch
  const at::Tensor xf = wide ? x : x.to(at::kFloat);
  at::Tensor normed = xf * xf.pow(2).mean(-1, true).add(eps).rsqrt();
  if (!wide) normed = normed.to(x.scalar_type());
  return Mul(normed, weight);
}

HeadsQkv RotateQkv(const Model& m, const LayerWeights& l, const at::Tensor& qkv,
                   const at::Tensor& cos, const at::Tensor& sin) {
  const ModelConfig& c = m.config;
  const int64_t b = qkv.size(0), t = qkv.size(1);
  // [B, T, heads * D] -> [B, heads, T, D]
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  HeadsQkv h;
  h.v = qkv.narrow(-1, q_out + kv_out, kv_out)
            .view({b, t, c.num_kv_heads, c.head_dim})
            .transpose(1, 2);
  if (c.qk_norm) {
    const at::Tensor q = RmsNorm(qkv.narrow(-1, 0, q_out).view({b, t, c.num_heads, c.head_dim}),
                                 l.q_norm, c.rms_norm_eps);
    const at::Tensor k =
        RmsNorm(qkv.narrow(-1, q_out, kv_out).view({b, t, c.num_kv_heads, c.head_dim}), l.k_norm,
                c.rms_norm_eps);
    h.q = ApplyRope(q.transpose(1, 2), cos, sin);
    h.k = ApplyRope(k.transpose(1, 2), cos, sin);
  } else {
    // q and k sit side by side in qkv: one rotation for both heads' sets.
    const at::Tensor qk = ApplyRope(qkv.narrow(-1, 0, q_out + kv_out)
                                        .view({b, t, c.num_heads + c.num_kv_heads, c.head_dim})
                                        .transpose(1, 2),
                                    cos, sin);
    h.q = qk.narrow(1, 0, c.num_heads);
    h.k = qk.narrow(1, c.num_heads, c.num_kv_heads);
  }
  return h;
}

at::Tensor AttendCached(const Model& m, size_t layer_index, const HeadsQkv& h, KvCache* cache,
                        const AttentionPlan& plan) {
  const ModelConfig& c = m.config;
  const int64_t b = h.q.size(0), t = h.q.size(2);
  const LayerKv kv = StoreKv(cache, layer_index, h.k, h.v);
  const at::Tensor out = Attention(h.q, kv.keys, kv.values, plan);
  return out.transpose(1, 2).reshape({b, t, c.num_heads * c.head_dim});
}

at::Tensor SelfAttention(const Model& m, const LayerWeights& l, size_t layer_index,
                         const at::Tensor& qkv, KvCache* cache, const at::Tensor& cos,
                         const at::Tensor& sin, const AttentionPlan& plan) {
  return AttendCached(m, layer_index, RotateQkv(m, l, qkv, cos, sin), cache, plan);
}

// x += down_proj(silu(gate) * up), over post_norm(x).
void MlpBlock(const ModelConfig& c, const LayerWeights& l, at::Tensor& x) {
  const at::Tensor h = RmsNorm(x, l.post_norm, c.rms_norm_eps);
  const at::Tensor gate_up =
      Linear(h, l.gate_up_proj, l.gate_up_bias, l.gate_up_scale);  // [B, T, 2 * inter]
  const int64_t inter = gate_up.size(-1) / 2;  // not the matrix's rows: a GPU's int4 is tiled
  LinearAddInto(x, SiluMul(gate_up, inter), l.down_proj, l.down_bias, l.down_scale);
}

}  // namespace medq::engine
