// The decode step in the form a CUDA graph can hold (internal): one token
// for each of N sequences, every input read from device tensors, so that the
// same kernel launches serve every step.
//
// Unlike ForwardRows (batch_forward.h), nothing here depends on a position
// the host knows: each row's position is an int64 on the device, its RoPE
// row is gathered from a table there, its key and value are written into
// its cache with index_copy_ at that position, and attention reads the
// cache's whole capacity under a mask built on the device (key k is seen
// when k <= position, and within the sliding window when there is one).
// Nothing is read back to the host and no shape changes from step to step.
// The same function runs eagerly on the CPU (the device-loop test switch,
// generate.h) and in a graph's capture on CUDA (decode_graph.h).
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// The device-side inputs of a step. ids and positions are the graph's
// static buffers: a replay reads whatever they hold at that moment.
struct StaticStepInputs {
  at::Tensor ids;        // [N] int64 on the model's device
  at::Tensor positions;  // [N] int64 on the model's device: where row i writes
  at::Tensor cos, sin;   // [P, head_dim] RoPE tables, P above every position
};

// Runs ids[i] at positions[i] of caches[i] for every i: writes each key and
// value into its cache (without advancing the host's count: the caller
// does), and returns float32 logits [N, vocab] on the device. Every cache
// must have been allocated zeroed (KvCache's `zeroed`): attention reads
// every slot, and a masked slot holding NaN would still poison the sum.
// Preconditions: N >= 1, caches distinct one-sequence caches, positions[i]
// < caches[i]->capacity(), ids in [0, vocab). Call under c10::InferenceMode.
at::Tensor StaticRows(const Model& model, const StaticStepInputs& in,
                      std::span<KvCache* const> caches);

}  // namespace medq::engine
