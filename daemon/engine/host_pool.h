// A pool for LibTorch's large CPU allocations: what a forward pass frees,
// the next layer takes again, without asking the kernel.
//
// A prefill chunk allocates and frees activations of megabytes in every
// layer. Through the C library each is a mapping of its own, or a piece of
// the heap's top, that goes back to the kernel when freed (munmap, or a
// trim), only to be faulted in again, zeroed, by the next layer; and
// LibTorch's 64-byte-aligned requests leave holes that the next request of
// the same size cannot reuse. For a 512-token prefill of a
// Qwen2.5-0.5B-shaped model on a 2-core VM that was about 300,000 page
// faults and 15 % of its time (bench/engine/README.md, "Page faults in
// prefill").
//
// Once UsePooledHostMemory() has run, every LibTorch CPU allocation of 1 MiB
// or more is a block of whole 2 MiB units, mapped on a 2 MiB boundary and
// advised for huge pages. A freed block waits in the pool for the next
// request of its size (or up to a quarter less); the pool keeps at most
// 1 GiB free and unmaps what would exceed it. ReleasePooledHostMemory gives
// every free block back; the daemon calls it where it gives memory back
// (`cleanup`: after each request by default, daemon/worker/memory.h).
// Smaller allocations keep LibTorch's allocator. Free of LibTorch's types.
#pragma once

#include <cstdint>

namespace medq::engine {

// Installs the pool as LibTorch's CPU allocator, once per process (later
// calls do nothing). Call it early in main(). Under AddressSanitizer it does
// nothing: the sanitizer's allocator must see every block.
void UsePooledHostMemory();

// Unmaps the pool's free blocks; the bytes given back. Any thread.
int64_t ReleasePooledHostMemory();

// What the pool holds: bytes waiting free, bytes lent out to live tensors,
// and how many requests a free block served (reuses) or a new mapping did.
struct HostPoolStats {
  int64_t free_bytes = 0;
  int64_t lent_bytes = 0;
  int64_t reuses = 0;
  int64_t mappings = 0;
};
HostPoolStats PooledHostMemory();

}  // namespace medq::engine
