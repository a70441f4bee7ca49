// The pieces of a decoder layer on LibTorch tensors (internal), shared by the
// forward pass over one sequence's positions (transformer.cc) and the batched
// decode step, where the projections run once for all sequences and the
// attention once per sequence (batch_forward.cc).
#pragma once

#include <ATen/ATen.h>

#include "daemon/engine/attention.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// transformers' LlamaRMSNorm over the last dimension: normalise in float32,
// cast back, then scale.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// A layer's queries, keys and values as [B, heads (q) or kv_heads (k, v), T,
// D], the keys and queries normed (q/k norms) and rotated.
struct HeadsQkv {
  at::Tensor q, k, v;
};

// Splits the q/k/v projection `qkv` [B, T, q_out + 2 * kv_out] into heads,
// applies the q/k norms and RoPE with cos/sin: [T, D] (every row at the same
// positions) or [B, 1, T, D] (each row at its own).
HeadsQkv RotateQkv(const Model& model, const LayerWeights& layer, const at::Tensor& qkv,
                   const at::Tensor& cos, const at::Tensor& sin);

// Writes h's keys and values into `cache` at cache->length() without
// advancing it (or uses them as they are when cache is null: a whole
// sequence from position 0), then attends under `plan`. Returns [B, T,
// heads * D], the input of o_proj.
at::Tensor AttendCached(const Model& model, size_t layer_index, const HeadsQkv& h, KvCache* cache,
                        const AttentionPlan& plan);

// The attention of one layer from its q/k/v projection `qkv` [B, T, q_out +
// 2 * kv_out] of positions start .. start + T - 1 (start = cache->length()):
// q/k norms, RoPE with cos/sin [T, D], the keys and values written into
// `cache` at start without advancing it (or used as they are when cache is
// null: a whole sequence from position 0), attention under `plan`. Returns
// [B, T, heads * D], the input of o_proj. RotateQkv, then AttendCached.
at::Tensor SelfAttention(const Model& model, const LayerWeights& layer, size_t layer_index,
                         const at::Tensor& qkv, KvCache* cache, const at::Tensor& cos,
                         const at::Tensor& sin, const AttentionPlan& plan);

// x += down_proj(silu(gate) * up), over post_norm(x); any number of rows.
void MlpBlock(const ModelConfig& config, const LayerWeights& layer, at::Tensor& x);

}  // namespace medq::engine
