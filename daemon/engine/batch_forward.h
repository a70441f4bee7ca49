// The forward pass of a batched decode step (internal): one new token for
// each of N sequences, each with its own one-sequence KV cache at its own
// position.
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// Runs token ids[i] at position caches[i]->length() of caches[i] for every i,
// writes each key and value into its cache and advances every cache by one.
// Returns float32 logits [N, vocab] on the model's device. The host loop's
// step: the device loop (a GPU) takes DecodeGraphs (decode_graph.h), whose
// inputs never leave the device.
// Where CpuDecodeRowsApply holds (CPU, float32 compute, float32 or bf16
// weights), the raw-buffer CpuDecodeRows: row i bitwise equal to that
// sequence's solo step. Otherwise (CUDA, other dtypes, the test switch off)
// LibTorch ops: one batched linear per projection and one RoPE for all rows,
// cache write and attention per sequence; row i equals the solo step up to
// float rounding. Preconditions: N >= 1, caches distinct one-sequence caches
// with room for one more position, ids in [0, vocab). Call under
// c10::InferenceMode. Throws c10::Error on LibTorch failures (out of memory).
at::Tensor ForwardRows(const Model& model, std::span<const int64_t> ids,
                       std::span<KvCache* const> caches);

}  // namespace medq::engine
