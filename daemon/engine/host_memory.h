// Host memory for the weights a CPU decode step streams in full every token.
//
// A decode step on the CPU reads every weight matrix once, front to back, so
// each 4 KiB page of a multi-gigabyte fp32 copy costs a TLB miss (two nested
// page walks on a virtual machine) and stops the hardware prefetcher at its
// edge. Copies the engine makes itself (a dtype conversion, a fused qkv or
// gate/up stack) are therefore placed in their own anonymous mapping, aligned
// to 2 MiB and advised for transparent huge pages, so the kernel backs them
// with 2 MiB pages where it can. Tensors mapped from a checkpoint without a
// copy stay in the page cache, shared with every other reader of the file.
#pragma once

#include <ATen/ATen.h>

namespace medq::engine {

// An uninitialized contiguous CPU tensor of `sizes` and `dtype`. From 2 MiB
// up it is its own mapping, starting on a 2 MiB boundary, with
// MADV_HUGEPAGE: a hint, which a kernel whose transparent huge pages are off
// ignores (the tensor then behaves as any other). Smaller tensors, and any
// size where the mapping fails, come from LibTorch's allocator. Throws what
// at::empty throws when memory runs out.
at::Tensor EmptyHostWeight(at::IntArrayRef sizes, at::ScalarType dtype);

// Whether `t`'s storage was placed by EmptyHostWeight's huge-page path
// (for tests and the benchmark's report).
bool IsHugePageAdvised(const at::Tensor& t);

}  // namespace medq::engine
