#include "daemon/engine/host_pool.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>  // TORCH_CHECK
#include <sys/mman.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "daemon/engine/aligned_mapping.h"
#include "daemon/engine/torch_version.h"

namespace medq::engine {
namespace {

constexpr size_t kPooledFrom = size_t{1} << 20;
constexpr size_t kUnit = kHugePage;
constexpr size_t kMaxFreeBytes = size_t{1} << 30;

// The pool's books. Blocks are keyed by address while lent, by size while
// free. One mutex: a block is at least a megabyte, so a lock per block is
// nothing beside what the tensor's producer writes into it. A std::mutex,
// not a medq::Mutex (common/mutex.h): this file includes LibTorch, which
// the thread-safety leg's clang cannot compile (decode_graph.cc says more).
class Pool {
 public:
  // A block of at least `bytes` (a multiple of kUnit), or nullptr.
  void* Take(size_t bytes) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      // The smallest free block that fits, unless it is a quarter larger:
      // a big block is worth more to a later, bigger request.
      auto it = free_.lower_bound(bytes);
      if (it != free_.end() && it->first <= bytes + bytes / 4) {
        void* p = it->second;
        lent_.emplace(p, it->first);
        stats_.free_bytes -= static_cast<int64_t>(it->first);
        stats_.lent_bytes += static_cast<int64_t>(it->first);
        ++stats_.reuses;
        free_.erase(it);
        return p;
      }
    }
    void* p = MapAligned(bytes);
    if (p == nullptr) return nullptr;
    const std::lock_guard<std::mutex> lock(mu_);
    lent_.emplace(p, bytes);
    stats_.lent_bytes += static_cast<int64_t>(bytes);
    ++stats_.mappings;
    return p;
  }

  // Takes back a block Take() gave; false for any other pointer.
  bool Give(void* p) {
    size_t bytes = 0;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      auto it = lent_.find(p);
      if (it == lent_.end()) return false;
      bytes = it->second;
      lent_.erase(it);
      stats_.lent_bytes -= static_cast<int64_t>(bytes);
      if (static_cast<size_t>(stats_.free_bytes) + bytes <= kMaxFreeBytes) {
        free_.emplace(bytes, p);
        stats_.free_bytes += static_cast<int64_t>(bytes);
        return true;
      }
    }
    ::munmap(p, bytes);
    return true;
  }

  int64_t Release() {
    std::multimap<size_t, void*> blocks;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      stats_.free_bytes = 0;
    }
    int64_t released = 0;
    for (const auto& [bytes, p] : blocks) {
      ::munmap(p, bytes);
      released += static_cast<int64_t>(bytes);
    }
    return released;
  }

  HostPoolStats Stats() {
    const std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;       // guarded by mu_
  std::unordered_map<void*, size_t> lent_;  // guarded by mu_
  HostPoolStats stats_;                     // guarded by mu_
};

// Never destroyed: tensors may be freed during static destruction.
Pool& ThePool() {
  static auto* pool = new Pool;
  return *pool;
}

// The raw deleter of LibTorch's own CPU allocator, for the blocks it gave.
c10::DeleterFnPtr g_fallback_delete = nullptr;

// LibTorch's CPU allocator with the pool in front of it. The context of each
// DataPtr is its data pointer (what raw_allocate requires), and one deleter
// serves both kinds of block: the pool's books tell them apart.
class PooledAllocator final : public c10::Allocator {
 public:
  explicit PooledAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

#if MEDQ_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t n) override {
    return Allocate(n);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override {
    return Allocate(n);
  }
#endif

  c10::DeleterFnPtr raw_deleter() const override {
    return &Delete;
  }

 private:
  c10::DataPtr Allocate(size_t n) const {
    if (n < kPooledFrom) return fallback_->allocate(n);
    const size_t bytes = RoundUp(n, kUnit);
    void* p = ThePool().Take(bytes);
    // No mapping: the pool's free blocks may be what is missing. If even
    // then there is none, LibTorch's allocator tries, and fails with its
    // own out-of-memory error (which torch_errors.h reports as such).
    if (p == nullptr && ThePool().Release() > 0) p = ThePool().Take(bytes);
    if (p == nullptr) return fallback_->allocate(n);
    return {p, p, &Delete, c10::Device(c10::DeviceType::CPU)};
  }

  static void Delete(void* p) {
    if (p == nullptr || ThePool().Give(p)) return;
    g_fallback_delete(p);
  }

  c10::Allocator* fallback_;
};

}  // namespace

void UsePooledHostMemory() {
#if defined(__SANITIZE_ADDRESS__)
  return;
#else
  static const bool installed = [] {
    c10::Allocator* fallback = c10::GetDefaultCPUAllocator();
    g_fallback_delete = fallback->raw_deleter();
    TORCH_CHECK(g_fallback_delete != nullptr, "LibTorch's CPU allocator has no raw deleter");
    static auto* allocator = new PooledAllocator(fallback);
    c10::SetCPUAllocator(allocator, /*priority=*/1);
    return true;
  }();
  (void)installed;
#endif
}

int64_t ReleasePooledHostMemory() {
  return ThePool().Release();
}

HostPoolStats PooledHostMemory() {
  return ThePool().Stats();
}

}  // namespace medq::engine
