// The device a LoadOptions names (internal: LibTorch types).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "common/result.h"

namespace medq::engine {

// "cpu", "cuda" or "cuda:N" as a device: kInvalidRequest for another name or
// an index past the visible devices, kNotReady when CUDA is not available.
// Shared by LoadModel and LoadEmbeddingModel (engine.cc).
Result<at::Device> ParseDevice(const std::string& text);

}  // namespace medq::engine
