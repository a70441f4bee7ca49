#include "daemon/engine/device_memory.h"

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "daemon/engine/torch_version.h"

#if MEDQ_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace medq::engine {
namespace {

#if MEDQ_WITH_CUDA
// LibTorch 2.5 moved the allocator's statistics types from
// c10::cuda::CUDACachingAllocator to c10::CachingAllocator (pytorch#130923).
#if MEDQ_TORCH_AT_LEAST(2, 5)
using StatType = c10::CachingAllocator::StatType;
#else
using StatType = c10::cuda::CUDACachingAllocator::StatType;
#endif
#endif

std::atomic<int> g_cuda_models{0};

}  // namespace

int CudaModelsLive() {
  return g_cuda_models.load();
}

std::shared_ptr<const void> CudaPresence() {
  ++g_cuda_models;
  return std::shared_ptr<const void>(nullptr, [](const void*) { --g_cuda_models; });
}

bool CudaAvailable() {
  return torch::cuda::is_available();
}

std::vector<DeviceMemory> QueryDeviceMemory() {
  std::vector<DeviceMemory> out;
#if MEDQ_WITH_CUDA
  if (!torch::cuda::is_available()) return out;
  const int count = static_cast<int>(torch::cuda::device_count());
  const bool measure = CudaModelsLive() > 0;
  for (int i = 0; i < count; ++i) {
    DeviceMemory m;
    m.index = i;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      m.name = prop.name;
      m.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    }
    if (!measure) {
      out.push_back(std::move(m));
      continue;
    }
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(i));
    m.measured = true;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      m.free_bytes = static_cast<int64_t>(free_b);
      m.total_bytes = static_cast<int64_t>(total_b);
    }
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(i);
    const auto agg = static_cast<size_t>(StatType::AGGREGATE);
    m.allocated_bytes = stats.allocated_bytes[agg].current;
    m.reserved_bytes = stats.reserved_bytes[agg].current;
    out.push_back(std::move(m));
  }
#endif
  return out;
}

double DeviceReadBandwidth(int index, size_t bytes) {
#if MEDQ_WITH_CUDA
  if (!torch::cuda::is_available()) return 0;
  const auto options = at::TensorOptions()
                           .dtype(at::kFloat)
                           .device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index)));
  const at::Tensor buffer = at::ones({static_cast<int64_t>(bytes / sizeof(float))}, options);
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    torch::cuda::synchronize(index);
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor sum = buffer.sum();
    torch::cuda::synchronize(index);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
#else
  (void)index;
  (void)bytes;
  return 0;
#endif
}

void EmptyDeviceCaches() {
#if MEDQ_WITH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace medq::engine
