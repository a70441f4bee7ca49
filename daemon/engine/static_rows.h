// The decode step in the form a CUDA graph can hold (internal): one token
// for each of N sequences, every input read from device tensors, so that the
// same kernel launches serve every step.
//
// Unlike ForwardRows (batch_forward.h), nothing here depends on a position
// the host knows: each row's position is an int64 on the device, and the
// ops that need it (fused_ops.h: RoPE with the cache write, attention over
// the cache) read it there, as fused CUDA kernels on a GPU or, as their
// reference, LibTorch ops that gather the RoPE row, write with index_copy_
// and attend over the cache's whole capacity under a mask built on the
// device. Nothing is read back to the host and no shape changes from step
// to step.
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
  at::Tensor cos, sin;   // [P, head_dim] RoPE tables in the compute dtype, P above every position
};

// Runs ids[i] at positions[i] of caches[i] for every i: writes each key and
// value into its cache (without advancing the host's count: the caller
// does), and returns float32 logits [N, vocab] on the device. Every cache
// must have been allocated zeroed (KvCache's `zeroed`): the reference
// attention reads every slot, and a masked slot holding NaN would still
// poison the sum.
// Preconditions: N >= 1, caches distinct one-sequence caches, positions[i]
// < caches[i]->capacity(), ids in [0, vocab). Call under c10::InferenceMode.
at::Tensor StaticRows(const Model& model, const StaticStepInputs& in,
                      std::span<KvCache* const> caches);

}  // namespace medq::engine
