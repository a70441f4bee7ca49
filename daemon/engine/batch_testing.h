// Test hook of the batch (internal; LibTorch types, so not in batch.h).
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "daemon/engine/batch.h"

namespace medq::engine {

// Called in Batch::Step() with each sequence's logits ([vocab] float32, on
// the model's device) just before its token is chosen, so that tests can
// compare them bitwise with a solo run. An empty function removes it.
// Process-wide, worker thread; production code never sets it.
using BatchLogitsObserver = std::function<void(SequenceId, const at::Tensor&)>;
void SetBatchLogitsObserver(BatchLogitsObserver observer);

}  // namespace medq::engine
