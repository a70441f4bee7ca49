// Host and device memory: measuring it and giving it back.
#pragma once

#include <cstdint>

#include "common/messages.h"

namespace medq::daemon {

// Resident set size of this process, from /proc/self/statm. Any thread.
int64_t ResidentSetBytes();

// Host RSS plus, with CUDA, every device's memory. Worker thread only: it
// asks LibTorch.
MemorySnapshot TakeMemorySnapshot();

// Empties the CUDA caching allocator on every device and returns free host
// memory to the kernel: the pool's free blocks (engine/host_pool.h) and the
// heap's (malloc_trim). Loaded weights stay. Worker thread only.
void ReleaseCachedMemory();

}  // namespace medq::daemon
