// The generation loop behind engine::Generate (internal).
#pragma once

#include "daemon/engine/model.h"

namespace medq::engine {

// As engine::Generate, but may throw c10::Error / std::exception (the facade
// maps them). Validation failures come back as errors.
//
// On a GPU the loop stays on the device: the sampler chooses there
// (Sampler::NextOnDevice), the chosen id feeds the next step from device
// memory, and the only transfer per token is that id, copied to pinned host
// memory for the caller. On the CPU the sampler runs on host tensors.
Result<GenerateResult> RunGeneration(const Model& model, const GenerateRequest& request,
                                     const std::function<bool(int32_t)>& on_token);

// Test switch: true runs the device loop on the CPU too, so that the loop a
// GPU takes is checked where there is none. Production code never calls it.
void SetDeviceLoopOnCpu(bool enabled);

// Whether runs on `model` take the device loop: on a GPU, or on the CPU with
// the switch above on. The batch (batch.h) follows the same rule.
bool UsesDeviceLoop(const Model& model);

}  // namespace medq::engine
