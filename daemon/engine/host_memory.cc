#include "daemon/engine/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "daemon/engine/aligned_mapping.h"

namespace medq::engine {
namespace {

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
