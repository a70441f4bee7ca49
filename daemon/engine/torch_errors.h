// Turning exceptions thrown inside the engine into medq::Error values at the
// public API boundary (internal).
#pragma once

#include <exception>
#include <string>

#include "common/error.h"

namespace medq::engine {

// Maps the exception in flight: CUDA out of memory -> kGpuOom; std::bad_alloc
// or LibTorch's CPU allocator failing -> kInsufficientMemory; any other c10::Error or
// std::exception -> kInternal. `context` (e.g. "loading model /path") starts the message. Call only
// inside a catch block.
Error ErrorFromCurrentException(const std::string& context);

}  // namespace medq::engine
