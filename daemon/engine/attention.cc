#include "daemon/engine/attention.h"

#include <cmath>
#include <limits>

#include "daemon/engine/torch_version.h"

namespace medq::engine {

// scaled_dot_product_attention has enable_gqa from 2.5 on.
#define MEDQ_SDPA_GQA MEDQ_TORCH_AT_LEAST(2, 5)

bool FusedCausalAttention() {
  return MEDQ_SDPA_GQA != 0;
}

AttentionPlan PlanAttention(int64_t start, int64_t t, std::optional<int64_t> sliding_window,
                            at::Device device) {
  const int64_t s = start + t;
  const bool window_cuts = sliding_window.has_value() && s > *sliding_window;
  AttentionPlan plan;
  if (t == 1 && !window_cuts) return plan;
  if (FusedCausalAttention() && start == 0 && !window_cuts) {
    plan.causal = true;
    return plan;
  }
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor q_pos = at::arange(start, s, opts).unsqueeze(1);  // [T, 1]
  const at::Tensor k_pos = at::arange(0, s, opts).unsqueeze(0);      // [1, S]
  at::Tensor mask = k_pos <= q_pos;
  if (window_cuts) mask = mask.logical_and(q_pos - k_pos < *sliding_window);
  plan.mask = mask;
  return plan;
}

at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionPlan& plan) {
#if MEDQ_SDPA_GQA
  // k and v keep their kv_heads: enable_gqa maps query head h to kv head
  // h / group inside the kernel, and a [T, S] mask broadcasts over heads.
  std::optional<at::Tensor> attn_mask;
  if (plan.mask.has_value()) attn_mask = *plan.mask;
  return at::scaled_dot_product_attention(q, k, v, attn_mask, /*dropout_p=*/0.0,
                                          /*is_causal=*/plan.causal, /*scale=*/std::nullopt,
                                          /*enable_gqa=*/true);
#else
  const std::optional<at::Tensor>& mask = plan.mask;
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
  // The `group` query heads sharing a kv head become group * T query rows of
  // that kv head: [B, kv_heads, group * T, D]; row g * T + i is head g, query i.
  const at::Tensor qg = q.reshape({b, kv_heads, group * t, d});
  std::optional<at::Tensor> mask_g;
  if (mask.has_value()) mask_g = group == 1 ? *mask : mask->repeat({group, 1});
#if MEDQ_TORCH_AT_LEAST(2, 0)
  // c10::optional is not std::optional before LibTorch 2.3; convert explicitly.
  c10::optional<at::Tensor> attn_mask;
  if (mask_g.has_value()) attn_mask = *mask_g;
  const at::Tensor out = at::scaled_dot_product_attention(qg, k, v, attn_mask, 0.0, false);
#else
  // transformers' eager path: (q · kᵀ) / sqrt(D), masked, softmax in float32.
  at::Tensor scores = at::matmul(qg, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  if (mask_g.has_value()) {
    scores = scores.masked_fill(mask_g->logical_not(), -std::numeric_limits<float>::infinity());
  }
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs, v);
#endif
  return out.reshape({b, heads, t, d});
#endif  // MEDQ_SDPA_GQA
}

at::Tensor AttendOneQuery(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& mask) {
  const int64_t heads = q.size(1), d = q.size(3), kv_heads = k.size(1);
  const at::Tensor qg = q.reshape({1, kv_heads, heads / kv_heads, d});
#if MEDQ_TORCH_AT_LEAST(2, 0)
  const at::Tensor out = at::scaled_dot_product_attention(qg, k, v, mask, 0.0, false);
#else
  at::Tensor scores = at::matmul(qg, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
  scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
  const at::Tensor out = at::matmul(at::softmax(scores, -1, at::kFloat).to(q.scalar_type()), v);
#endif
  return out.reshape({1, 1, heads * d});
}

}  // namespace medq::engine
