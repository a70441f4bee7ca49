// Facts about the LibTorch this binary was built with, for `version`.
#pragma once

#include <string>

namespace medq::engine {

// The LibTorch version this binary was built against, e.g. "1.13.1".
std::string TorchVersion();

// True when this binary was built against a LibTorch with CUDA.
bool BuiltWithCuda();

}  // namespace medq::engine
