// The generation loop behind engine::Generate (internal).
#pragma once

#include "daemon/engine/model.h"

namespace medq::engine {

// As engine::Generate, but may throw c10::Error / std::exception (the facade
// maps them). Validation failures come back as errors.
//
// On a GPU the loop stays on the device: the sampler chooses there
// (Sampler::NextOnDevice), the chosen id feeds the next step from device
// memory, the decode steps replay a CUDA graph (decode_graph.h), and the
// only transfer per token is that id, copied to pinned host memory for the
// caller. On the CPU the sampler runs on host tensors.
Result<GenerateResult> RunGeneration(const Model& model, const GenerateRequest& request,
                                     const std::function<bool(int32_t)>& on_token);

// Runs what a first request would otherwise pay for on a GPU: on the
// worker's own stream (UseWorkerStream), a Batch reads a prompt of two
// prefill chunks (from position 0, then at an offset: the causal and the
// masked attention, cuBLAS's shapes for a chunk), produces its first token
// and three more (a graph capture and its replays, the device sampler, the
// pinned copy of the ids), then Generate a short run of its own; all on
// zeros that nothing keeps. LoadModel calls it for a model on CUDA before
// handing it out, so a preloaded model is warm before `ready` (on an H100
// the first 512-token prefill took 217 ms, a later one 19 ms). Failures are
// swallowed: the first real request meets them again and reports them.
void WarmUp(const Model& model);

// Whether runs on `model` take the device loop: on a GPU, or on the CPU with
// SetDeviceLoopOnCpu (engine.h) on. The batch (batch.h) follows the same rule.
bool UsesDeviceLoop(const Model& model);

}  // namespace medq::engine
