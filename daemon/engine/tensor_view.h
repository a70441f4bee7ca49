// The bridge from safetensors bytes to at::Tensor, without a host copy.
#pragma once

#include <ATen/ATen.h>

#include <memory>

#include "daemon/engine/safetensors.h"

namespace medq::engine {

at::ScalarType ToScalarType(StDtype dtype);

// A CPU tensor over the tensor's bytes in the file's mapping (no copy). The
// tensor keeps `file` alive; it is read-only memory: never write into it (copy
// with .to()/.clone() first). When the bytes are not aligned to the element
// size the tensor is a copy instead.
at::Tensor TensorView(const std::shared_ptr<const SafetensorsFile>& file, const StTensorInfo& info);

}  // namespace medq::engine
