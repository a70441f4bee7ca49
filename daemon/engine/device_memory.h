// What the engine knows about device memory, for `health` and
// `cleanup-memory`. Call only from the worker thread, which owns LibTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace medq::engine {

struct DeviceMemory {
  int index = 0;
  std::string name;
  int64_t total_bytes = 0;
  // The rest is measured only while a model lives on some CUDA device
  // (`measured`): asking for free memory or the allocator's statistics
  // creates a CUDA context, which keeps a laptop's GPU awake.
  bool measured = false;
  int64_t free_bytes = 0;
  int64_t allocated_bytes = 0;  // held by live tensors (caching allocator)
  int64_t reserved_bytes = 0;   // held by the caching allocator, used or not
};

// True when this build of LibTorch has CUDA and at least one device is visible.
bool CudaAvailable();

// One entry per visible CUDA device; empty on a CPU-only build or machine.
// Names and totals come from the device properties, which need no context;
// usage is measured only while CudaModelsLive() > 0.
std::vector<DeviceMemory> QueryDeviceMemory();

// Models whose weights are on a CUDA device now. Load() takes a CudaPresence
// for a model placed there; the last copy of the model gives it back.
int CudaModelsLive();
std::shared_ptr<const void> CudaPresence();

// Returns cached, unused blocks of the CUDA caching allocator to the driver on
// every device. A no-op without CUDA. Live tensors (loaded weights) stay.
void EmptyDeviceCaches();

// For benchmarks: bytes per second a reduction reads from a `bytes`-sized
// buffer on CUDA device `index` (best of a few passes), the bound on decode
// speed there. 0 without CUDA.
double DeviceReadBandwidth(int index, size_t bytes);

}  // namespace medq::engine
