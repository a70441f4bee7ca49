// Scaled dot-product attention over the KV cache, grouped-query aware.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace medq::engine {

// True when this LibTorch (2.5 and later) runs a causal prefill, grouped
// query heads included, in scaled_dot_product_attention's fused kernels
// (flash or memory-efficient on CUDA, the flash kernel on the CPU) with
// `is_causal` and `enable_gqa`: no T x T mask or score matrix is ever built.
// The memory estimate (ModelInfo::fused_causal_attention) follows it.
bool FusedCausalAttention();

// Where a prompt's scores are built (not FusedCausalAttention()): the most
// query rows whose scores [heads · rows, keys] exist at once, LibTorch
// 1.13's blocks of queries (Attention); 0 where a chunk's queries are
// scored at once (LibTorch 2.0 to 2.4, whose scaled_dot_product_attention
// takes the whole mask).
int64_t AttentionQueryBlock();

// Which key positions each new query may see: causal, and within
// `sliding_window` positions when set.
struct AttentionPlan {
  // A prefill from position 0 with no window cut: the fused kernels' own
  // causal rule (query i sees keys 0..i), and no mask.
  bool causal = false;
  // Otherwise a bool mask [T, start + T] (true = may attend) on the device,
  // or nullopt when every query sees every key (one query, no window cut).
  std::optional<at::Tensor> mask;
  // The window the mask was made with: LibTorch 1.13's path (Attention)
  // reads it to leave out keys no query of a block sees.
  std::optional<int64_t> sliding_window;
};
AttentionPlan PlanAttention(int64_t start, int64_t t, std::optional<int64_t> sliding_window,
                            at::Device device);

// q: [B, heads, T, D]; k, v: [B, kv_heads, S, D] (S = start + T); `plan` from
// PlanAttention. Query head h reads kv head h / (heads / kv_heads), as
// transformers' repeat_kv does, without copying k or v. Softmax runs in
// float32. Returns [B, heads, T, D] in q's dtype. Before LibTorch 2.0 (no
// scaled_dot_product_attention) it is transformers' eager attention, a
// block of AttentionQueryBlock() queries at a time over only the keys the
// block's queries see.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionPlan& plan);

// The decode step's attention of one sequence (static_rows.h): one query
// position q [1, heads, 1, D] against a cache's whole capacity k, v [1,
// kv_heads, S, D] under `mask` [1, S] (bool, true = may attend), built on the
// device. The `group` query heads of a kv head become that head's group
// query rows ([1, kv_heads, group, D]: transformers' repeat_kv without the
// copy), so no kernel needs grouped-query support and the mask broadcasts
// over them. Returns [1, 1, heads * D] in q's dtype.
at::Tensor AttendOneQuery(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& mask);

}  // namespace medq::engine
