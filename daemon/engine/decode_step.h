// One decode step (one new token for each of N sequences) on the CPU with
// float32 activations, computed on raw buffers: the arithmetic of
// transformer.cc's LibTorch path without its ~40 dispatched ops per layer,
// each a few microseconds, which were a fifth of a SmolLM-135M step on 2
// cores. Internal: Forward() takes this path by itself for one sequence
// (N = 1), and the batch (batch.h) for all its decoding sequences.
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// Whether CpuDecodeStep can run one token of `model` against `cache`: the
// model computes in float32 on the CPU with float32, bf16, int8 or int4
// (quantize.h) projection weights, the cache holds one sequence, grad mode is off, and the switch
// below is on. Never throws.
bool CpuDecodeStepApplies(const Model& model, const KvCache& cache);

// The same conditions on the model alone: whether CpuDecodeRows can run it
// (each cache it is given holding one sequence). Never throws.
bool CpuDecodeRowsApply(const Model& model);

// Runs token `id` at position cache.length(): writes its key and value into
// the cache (without advancing it) and returns float32 logits [1, 1, vocab].
// Equal to Forward()'s LibTorch path up to float32 rounding. Preconditions:
// CpuDecodeStepApplies, id in [0, vocab), cache.length() < cache.capacity().
// Throws c10::Error when the logits cannot be allocated.
at::Tensor CpuDecodeStep(const Model& model, int64_t id, KvCache& cache);

// One token for each of n = ids.size() sequences: ids[i] at position
// caches[i]->length() of caches[i] (each a one-sequence cache, each at its
// own position). Writes each key and value into its cache (without advancing
// it) and returns float32 logits [n, vocab]. Row i is bitwise what
// CpuDecodeStep(model, ids[i], *caches[i]) returns, whatever the other rows
// are: every per-row computation is the one-row arithmetic, and the
// projections read each weight once for all rows (kernels::MatRowsInto, or
// kernels::MatRowsPackedInto over the model's packed copy where it holds
// one: packed_weights.h).
// CpuDecodeStep is this with n = 1. Preconditions: CpuDecodeRowsApply,
// n >= 1, caches distinct, each as CpuDecodeStep's.
at::Tensor CpuDecodeRows(const Model& model, std::span<const int64_t> ids,
                         std::span<KvCache* const> caches);

// Test switch: false makes CpuDecodeStepApplies() false, so Forward() takes
// the LibTorch path for every step. Process-wide; production never calls it.
void SetCpuDecodeStepEnabled(bool enabled);

}  // namespace medq::engine
