// Scaled dot-product attention over the KV cache, grouped-query aware.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace medq::engine {

// Which key positions each new query may see: causal, and within
// `sliding_window` positions when set. Returns a bool mask [T, start + T]
// (true = may attend) on `device`, or nullopt when every query sees every key
// (one query and no window cut).
std::optional<at::Tensor> AttentionMask(int64_t start, int64_t t,
                                        std::optional<int64_t> sliding_window, at::Device device);

// q: [B, heads, T, D]; k, v: [B, kv_heads, S, D] (S = start + T); mask from
// AttentionMask. Query head h reads kv head h / (heads / kv_heads), as
// transformers' repeat_kv does, without copying k or v. Softmax runs in
// float32. Returns [B, heads, T, D] in q's dtype.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& mask);

}  // namespace medq::engine
