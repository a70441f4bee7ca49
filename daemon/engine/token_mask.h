// Applying a TokenConstraint (engine.h) to a step's logits, on any device.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "daemon/engine/engine.h"

namespace medq::engine {

// Asks `constraint` for the allowed set and returns `logits` ([vocab] float)
// with every other token at -inf; `words` is scratch reused between steps.
// The host loop masks a host copy of the row; the device loop (`on_device`:
// a GPU, or the CPU with SetDeviceLoopOnCpu, which is how CI runs this
// branch) sends the set as (vocab + 31) / 32 words, one small copy, and
// expands it with tensor ops where the logits are.
at::Tensor MaskLogits(const at::Tensor& logits, TokenConstraint& constraint,
                      std::vector<int32_t>& words, bool on_device);

}  // namespace medq::engine
