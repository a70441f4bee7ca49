#include "daemon/engine/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace medq::engine {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

uintptr_t RoundUp(uintptr_t n, uintptr_t to) {
  return (n + to - 1) / to * to;
}

// The storage deleter of a huge-page tensor: unmaps what MapAligned gave. Its
// address doubles as the mark IsHugePageAdvised looks for.
struct Mapping {
  static void Unmap(void* ctx) {
    const auto* m = static_cast<const Mapping*>(ctx);
    ::munmap(m->start, m->length);
    delete m;
  }
  void* start;
  size_t length;
};

// `length` bytes (a multiple of the page size) of fresh anonymous memory at
// a 2 MiB boundary, or nullptr. Maps 2 MiB more than asked and gives back
// the unaligned head and the tail.
void* MapAligned(size_t length) {
  const size_t padded = length + kHugePage;
  void* raw = ::mmap(nullptr, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = aligned + length;
  if (start + padded > end) ::munmap(reinterpret_cast<void*>(end), start + padded - end);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

at::Tensor EmptyHostWeight(at::IntArrayRef sizes, at::ScalarType dtype) {
  const auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  int64_t numel = 1;
  for (const int64_t s : sizes)
    numel *= s;
  const auto bytes = static_cast<uintptr_t>(numel) * c10::elementSize(dtype);
  if (bytes < kHugePage) return at::empty(sizes, options);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = RoundUp(bytes, page);
  void* data = MapAligned(length);
  if (data == nullptr) return at::empty(sizes, options);
  // A hint only: EINVAL where the kernel has no transparent huge pages.
  ::madvise(data, length, MADV_HUGEPAGE);
  auto* mapping = new Mapping{data, length};
  c10::DataPtr ptr(data, mapping, &Mapping::Unmap, at::Device(at::kCPU));
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(bytes), std::move(ptr),
                       /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, options).set_(storage, 0, sizes);
}

bool IsHugePageAdvised(const at::Tensor& t) {
  return t.defined() && t.storage().data_ptr().get_deleter() == &Mapping::Unmap;
}

}  // namespace medq::engine
