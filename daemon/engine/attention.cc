#include "daemon/engine/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "daemon/engine/torch_version.h"

namespace medq::engine {

#if !MEDQ_TORCH_AT_LEAST(2, 0)
// The query rows of a block of BlockedEagerAttention (LibTorch before 2.0):
// measured on a 2-core AVX2 CPU (bench/engine/README.md), blocks of 32, 64
// and 128 rows read a 512- and a 2,048-token prompt within 3 % of each
// other, save for 128 rows on SmolLM-135M's 512 (14 % slower: fewer keys
// left out).
constexpr int64_t kQueryBlock = 64;
#endif

// scaled_dot_product_attention has enable_gqa from 2.5 on.
#define MEDQ_SDPA_GQA MEDQ_TORCH_AT_LEAST(2, 5)

bool FusedCausalAttention() {
  return MEDQ_SDPA_GQA != 0;
}

int64_t AttentionQueryBlock() {
#if MEDQ_TORCH_AT_LEAST(2, 0)
  return 0;
#else
  return kQueryBlock;
#endif
}

AttentionPlan PlanAttention(int64_t start, int64_t t, std::optional<int64_t> sliding_window,
                            at::Device device) {
  const int64_t s = start + t;
  const bool window_cuts = sliding_window.has_value() && s > *sliding_window;
  AttentionPlan plan;
  plan.sliding_window = sliding_window;
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

#if !MEDQ_TORCH_AT_LEAST(2, 0)
namespace {

// transformers' eager path: (q · kᵀ) / sqrt(D), masked, softmax in float32,
// times v. q [B, kv_heads, group · R, D] (a kv head's group query heads, R
// queries each, head-major), k, v [B, kv_heads, L, D]; `hidden` [R, L]
// (true = may not attend) holds for every head of the group.
at::Tensor EagerAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          int64_t group, const std::optional<at::Tensor>& hidden) {
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2));
  scores.div_(std::sqrt(static_cast<double>(q.size(-1))));
  if (hidden.has_value()) {
    const int64_t b = q.size(0), kv_heads = q.size(1), l = k.size(2);
    scores.view({b, kv_heads, group, q.size(2) / group, l})
        .masked_fill_(*hidden, -std::numeric_limits<float>::infinity());
  }
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return at::matmul(probs, v);
}

// A prompt's queries a block at a time: each block's scores only over the
// keys one of its queries sees (causal: up to its last query's position;
// with a sliding window, from its first query's window), so that a prefill
// from position 0 computes about half the scores, and a chunk's score
// matrix is [heads · kQueryBlock, keys], not [heads · T, keys] (75 MB a
// layer for a 512-token chunk at position 3584 of a 9-head model). Blocks
// start at positions that are multiples of kQueryBlock, so a query's block,
// and so its result, is the same however the prompt is cut into chunks of
// a multiple of kQueryBlock tokens.
at::Tensor BlockedEagerAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const AttentionPlan& plan) {
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t kv_heads = k.size(1), group = heads / kv_heads;
  const int64_t start = k.size(2) - t;
  const at::Tensor q5 = q.reshape({b, kv_heads, group, t, d});
  const at::Tensor hidden = plan.mask->logical_not();
  at::Tensor out = at::empty({b, kv_heads, group, t, d}, q.options());
  for (int64_t i0 = 0; i0 < t;) {
    const int64_t i1 = std::min(t, (start + i0) / kQueryBlock * kQueryBlock + kQueryBlock - start);
    const int64_t n = i1 - i0;
    const int64_t k1 = start + i1;
    const int64_t k0 = plan.sliding_window.has_value()
                           ? std::max<int64_t>(0, start + i0 - *plan.sliding_window + 1)
                           : 0;
    const at::Tensor rows = q5.narrow(3, i0, n).reshape({b, kv_heads, group * n, d});
    const at::Tensor part = EagerAttention(rows, k.narrow(2, k0, k1 - k0), v.narrow(2, k0, k1 - k0),
                                           group, hidden.narrow(0, i0, n).narrow(1, k0, k1 - k0));
    out.narrow(3, i0, n).copy_(part.view({b, kv_heads, group, n, d}));
    i0 = i1;
  }
  return out.view({b, heads, t, d});
}

}  // namespace
#endif

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
  const int64_t b = q.size(0), heads = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t kv_heads = k.size(1);
  const int64_t group = heads / kv_heads;
  // The `group` query heads sharing a kv head become group * T query rows of
  // that kv head: [B, kv_heads, group * T, D]; row g * T + i is head g, query i.
  const at::Tensor qg = q.reshape({b, kv_heads, group * t, d});
#if MEDQ_TORCH_AT_LEAST(2, 0)
  // c10::optional is not std::optional before LibTorch 2.3; convert explicitly.
  c10::optional<at::Tensor> attn_mask;
  if (plan.mask.has_value()) attn_mask = group == 1 ? *plan.mask : plan.mask->repeat({group, 1});
  const at::Tensor out = at::scaled_dot_product_attention(qg, k, v, attn_mask, 0.0, false);
#else
  if (plan.mask.has_value()) return BlockedEagerAttention(q, k, v, plan);
  const at::Tensor out = EagerAttention(qg, k, v, group, std::nullopt);
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
  const at::Tensor out = EagerAttention(qg, k, v, heads / kv_heads, mask.logical_not());
#endif
  return out.reshape({1, 1, heads * d});
}

}  // namespace medq::engine
