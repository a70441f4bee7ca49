// The device a LoadOptions names and the dtype a ModelInfo reports
// (internal: LibTorch types).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "common/result.h"

namespace medq::engine {

// "cpu", "cuda" or "cuda:N" as a device: kInvalidRequest for another name or
// an index past the visible devices, kNotReady when CUDA is not available.
// Shared by LoadModel and LoadEmbeddingModel (engine.cc).
Result<at::Device> ParseDevice(const std::string& text);

// "bf16", "fp16" or "fp32" (any other type): ModelInfo's and
// EmbeddingModelInfo's dtype.
std::string DtypeName(at::ScalarType t);

// "cpu" or "cuda:N": ModelInfo's and EmbeddingModelInfo's device.
std::string DeviceName(at::Device device);

}  // namespace medq::engine
