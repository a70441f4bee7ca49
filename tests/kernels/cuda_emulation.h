// A CPU emulation of as much of CUDA's execution model as the decode
// kernels use (daemon/engine/cuda/decode_kernels.cuh), so that every build
// runs them, GPU or not: each CUDA thread of a block is a std::thread,
// __syncthreads a barrier of the block's threads, a warp sum (the kernels'
// only shuffles, through device_common.cuh's WarpSum) an exchange through
// memory between two barriers of the warp's 32 threads, the dynamic shared memory a buffer of the
// launch's size (NaN-filled before each block, as uninitialized memory may hold anything) and a
// kernel's static __shared__ array a function-local static (blocks run one
// after another, so one copy serves them all). Device helpers of
// device_common.cuh are given for float elements only.
//
// What it shows: the kernels' indexing, their synchronization and their
// arithmetic, exactly as written. What it cannot: timing, memory ordering
// between warps without a barrier (the kernels have none), and the
// element types' conversions.
//
// Include this before decode_kernels.cuh, in a test only: it defines
// macros with CUDA's names.
#pragma once

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "daemon/engine/cuda/decode_types.h"

namespace medq::engine::cuda::emulation {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// What one emulated CUDA thread sees.
struct ThreadState {
  Dim3 thread, block;
  float* shared = nullptr;
  std::barrier<>* block_barrier = nullptr;
  std::barrier<>* warp_barrier = nullptr;
  float* warp_exchange = nullptr;  // [32], the warp's
};
inline thread_local ThreadState t_state;
// The launch's shape: written by Launch before its threads start.
inline Dim3 g_grid, g_block;

inline void SyncThreads() {
  t_state.block_barrier->arrive_and_wait();
}

// Runs `kernel` for every block of `grid` with `threads` threads (a
// multiple of 32) and `shared_floats` floats of dynamic shared memory.
inline void Launch(Dim3 grid, unsigned threads, size_t shared_floats,
                   const std::function<void()>& kernel) {
  g_grid = grid;
  g_block = {threads, 1, 1};
  std::vector<float> shared(shared_floats + 1);
  std::barrier<> block_barrier(threads);
  const unsigned warps = threads / 32;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  for (unsigned w = 0; w < warps; ++w)
    warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
  std::vector<float> exchange(32 * static_cast<size_t>(warps));
  std::vector<std::thread> team;
  for (unsigned t = 0; t < threads; ++t) {
    team.emplace_back([&, t] {
      t_state.thread = {t, 0, 0};
      t_state.shared = shared.data();
      t_state.block_barrier = &block_barrier;
      t_state.warp_barrier = warp_barriers[t / 32].get();
      t_state.warp_exchange = exchange.data() + 32 * (t / 32);
      for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
          for (unsigned x = 0; x < grid.x; ++x) {
            t_state.block = {x, y, z};
            if (t == 0) std::fill(shared.begin(), shared.end(), NAN);
            block_barrier.arrive_and_wait();
            kernel();
            block_barrier.arrive_and_wait();  // the block is done with shared
          }
        }
      }
    });
  }
  for (std::thread& t : team)
    t.join();
}

}  // namespace medq::engine::cuda::emulation

// CUDA's names, as the kernels use them.
#define __global__
#define __device__
#define __forceinline__ inline
#define threadIdx (::medq::engine::cuda::emulation::t_state.thread)
#define blockIdx (::medq::engine::cuda::emulation::t_state.block)
#define blockDim (::medq::engine::cuda::emulation::g_block)
#define gridDim (::medq::engine::cuda::emulation::g_grid)
#define __shared__ static
#define __syncthreads ::medq::engine::cuda::emulation::SyncThreads
#define __expf std::exp

// CUDA's vector type and the built-ins the GEMV reads it with.
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline uint4 __ldg(const uint4* p) {
  uint4 v;
  std::memcpy(&v, p, sizeof v);  // the bytes, whatever type wrote them
  return v;
}
inline float __uint_as_float(unsigned u) {
  return std::bit_cast<float>(u);
}
inline float __fdividef(float a, float b) {
  return a / b;
}

// device_common.cuh's helpers, for float elements.
namespace medq::engine::cuda {
namespace {

inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
template <typename T>
float Load(const T* p, int64_t i) {
  return p[i];
}
template <typename T>
void Store(T* p, int64_t i, float v) {
  p[i] = v;
}
template <typename T>
T* RowPointer(const uint64_t* table, int row) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(table[row]));
}
inline float* DynamicShared() {
  return emulation::t_state.shared;
}
// device_common.cuh's butterfly (v += shfl_xor(v, 16), then 8, 4, 2, 1),
// each lane's sums in the order the device makes them, from one exchange of
// the warp's values: two barriers instead of ten.
inline float WarpSum(float v) {
  const unsigned lane = emulation::t_state.thread.x % 32;
  emulation::t_state.warp_exchange[lane] = v;
  emulation::t_state.warp_barrier->arrive_and_wait();
  float values[32];
  std::copy(emulation::t_state.warp_exchange, emulation::t_state.warp_exchange + 32, values);
  emulation::t_state.warp_barrier->arrive_and_wait();
  for (unsigned offset = 16; offset > 0; offset /= 2) {
    float next[32];
    for (unsigned l = 0; l < 32; ++l)
      next[l] = values[l] + values[l ^ offset];
    std::copy(next, next + 32, values);
  }
  return values[lane];
}

}  // namespace
}  // namespace medq::engine::cuda
