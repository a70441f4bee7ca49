// The decode step in the form a CUDA graph can hold (internal): one token
// for each of N rows, every input read from device tensors, so that the
// same kernel launches serve every step, whichever sequences the rows hold.
//
// Unlike ForwardRows (batch_forward.h), nothing here depends on a position
// or a cache the host knows: each row's position, its cache's address and
// capacity and its RoPE tables' addresses sit in device tensors (the row
// tables), and the ops that need them (fused_ops.h: RoPE with the cache
// write, attention over the cache) read them there, as fused CUDA kernels
// on a GPU. Their references, LibTorch ops that gather the RoPE row, write
// with index_copy_ and attend over the cache's whole capacity under a mask
// built on the device, take each row's cache from the host's list instead
// (a graph that captured them must be captured again for other caches).
// Nothing is read back to the host and no shape changes from step to step.
// The same function runs eagerly on the CPU (the device-loop test switch,
// generate.h) and in a graph's capture on CUDA (decode_graph.h).
#pragma once

#include <ATen/ATen.h>

#include <span>
#include <vector>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// The device-side inputs of a step of N rows: the graph's static buffers,
// which a replay reads whatever they hold at that moment.
struct StaticStepInputs {
  at::Tensor ids;         // [N] int64: row i's input token
  at::Tensor positions;   // [N] int64: where row i writes
  at::Tensor advance;     // [N] int64: added to positions after a step (1, or 0 for padding)
  at::Tensor capacities;  // [N] int64: row i's cache's capacity
  // [2 * layers + 2, N] int64, the addresses row i reads and writes: the
  // keys of layer l (entry l), its values (layers + l), the RoPE cos and sin
  // tables (2 * layers, 2 * layers + 1) of row i's cache.
  at::Tensor tables;
};

// The host's view of what a step's rows are bound to: the contents of
// StaticStepInputs' tables, capacities, advance and positions for a list of
// caches. Equal bindings mean the device buffers need no upload.
struct RowBinding {
  std::vector<int64_t> tables, capacities, advance, positions;
};

// Zeroed StaticStepInputs of `rows` rows on the model's device.
StaticStepInputs AllocateStepInputs(const Model& model, int64_t rows);

// The binding of `caches` (one a row): the first `sequences` rows advance by
// one a step, the rest (padding) by none; every position is the cache's
// length().
RowBinding BindingOf(const Model& model, std::span<KvCache* const> caches, size_t sequences);

// Writes the binding's tables, capacities and advance (`rows_too`) and its
// positions into `in`.
void Upload(const RowBinding& binding, bool rows_too, StaticStepInputs& in);

// Runs ids[i] at positions[i] of caches[i] for every row i: writes each key
// and value into its cache (without advancing the host's count: the caller
// does), and returns float32 logits [N, vocab] on the device. `in` must hold
// the binding of `caches` (Upload). Every cache must have been allocated
// zeroed (KvCache's `zeroed`): the reference attention reads every slot,
// and a masked slot holding NaN would still poison the sum.
// Preconditions: N >= 1, caches one-sequence caches (distinct, but for
// padding rows, which may share one), positions[i] < caches[i]->capacity(),
// ids in [0, vocab). Call under c10::InferenceMode.
at::Tensor StaticRows(const Model& model, const StaticStepInputs& in,
                      std::span<KvCache* const> caches);

}  // namespace medq::engine
