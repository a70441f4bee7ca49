// Process-wide LibTorch setup and facts, for the worker thread and `version`.
#pragma once

#include <string>

namespace medq::engine {

// Sets LibTorch's process-wide knobs once, on the worker thread before its
// first task: intra-op threads (`num_threads` > 0, else LibTorch's default
// of one per core). Never call per request.
void InitWorkerThread(int num_threads);

// The LibTorch version this binary was built against, e.g. "1.13.1".
std::string TorchVersion();

// True when this binary was built against a LibTorch with CUDA.
bool BuiltWithCuda();

}  // namespace medq::engine
