// The projection matrices and lm_head of a CPU bf16 model, packed a second
// time in tiles of 16 rows for batched decode steps (LoadOptions::
// pack_for_batches). The CPU decode step then reads each tile once for all
// the sequences of a step with a kernel that broadcasts x instead of loading
// a vector of it per multiply-add (kernels::MatRowsPackedInto), so four
// sequences cost about what one does (bench/engine/README.md). Prefill,
// LoRA merges and the embedding lookup keep reading the row-major matrices.
#pragma once

#include "daemon/engine/model.h"

namespace medq::engine {

// Whether `w`'s matrices are what PackProjections packs: CPU, bf16, 2-D and
// contiguous (CpuDecodeRowsApply's weights).
bool PackableProjections(const ModelWeights& w);

// Sets every *_packed tensor of `w` to the packed copy of its matrix. Where
// `base` is given (a LoRA merge's base model) and a matrix is still the
// base's tensor, the base's packed copy is shared instead of packing again.
// Precondition: PackableProjections(w). Throws what allocation throws.
void PackProjections(ModelWeights& w, const ModelWeights* base);

}  // namespace medq::engine
