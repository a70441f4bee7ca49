// The decoder-only transformer forward pass shared by the four supported
// architectures (internal: LibTorch types; tests call it directly).
#pragma once

#include <ATen/ATen.h>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

enum class LogitsFor { kAllPositions, kLastPosition };

// Runs ids [B, T] (int64, any device) at positions cache.length() ..
// cache.length() + T - 1, writes their keys/values into `cache` in place and
// advances it. Returns float32 logits [B, T, vocab] (kAllPositions) or
// [B, 1, vocab] (kLastPosition: lm_head only on the last position) on the
// model's device. Precondition: cache.length() + T <= cache.capacity(), ids in
// [0, vocab). Call under c10::InferenceMode. Throws c10::Error on LibTorch
// failures (out of memory). One token of one sequence of a float32 CPU model
// runs as CpuDecodeStep (decode_step.h), the same arithmetic on raw buffers.
at::Tensor Forward(const Model& model, const at::Tensor& ids, KvCache& cache, LogitsFor which);

// The same network over whole sequences ids [B, T] at positions 0 .. T - 1,
// without a KV cache: float32 logits [B, T, vocab]. Differentiable: with grad
// mode on and weights that require grad, backward() reaches every weight (the
// demo model's trainer uses it). Throws c10::Error like Forward.
at::Tensor ForwardSequence(const Model& model, const at::Tensor& ids);

}  // namespace medq::engine
