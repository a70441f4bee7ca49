// Anonymous memory on 2 MiB boundaries, for the kernel's transparent huge
// pages (host_memory.cc's weight copies, host_pool.cc's blocks).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace medq::engine {

inline constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

inline uintptr_t RoundUp(uintptr_t n, uintptr_t to) {
  return (n + to - 1) / to * to;
}

// `length` bytes (a multiple of the page size) of fresh, zeroed anonymous
// memory at a 2 MiB boundary, advised for huge pages (a hint, which a kernel
// without them ignores), or nullptr. Maps 2 MiB more than asked and gives
// back the unaligned head and the tail; ::munmap(p, length) frees it.
inline void* MapAligned(size_t length) {
  const size_t padded = length + kHugePage;
  void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = aligned + length;
  if (start + padded > end) ::munmap(reinterpret_cast<void*>(end), start + padded - end);
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace medq::engine
