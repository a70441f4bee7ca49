#include "daemon/engine/tensor_view.h"

#include <cstdint>

namespace medq::engine {

at::ScalarType ToScalarType(StDtype dtype) {
  switch (dtype) {
    case StDtype::kF64:
      return at::kDouble;
    case StDtype::kF32:
      return at::kFloat;
    case StDtype::kF16:
      return at::kHalf;
    case StDtype::kBF16:
      return at::kBFloat16;
    case StDtype::kI64:
      return at::kLong;
    case StDtype::kI32:
      return at::kInt;
    case StDtype::kI16:
      return at::kShort;
    case StDtype::kI8:
      return at::kChar;
    case StDtype::kU8:
      return at::kByte;
    case StDtype::kBool:
      return at::kBool;
  }
  return at::kByte;
}

at::Tensor TensorView(const std::shared_ptr<const SafetensorsFile>& file,
                      const StTensorInfo& info) {
  const auto options = at::TensorOptions().dtype(ToScalarType(info.dtype)).device(at::kCPU);
  void* data = const_cast<std::byte*>(file->Data(info));  // read-only by contract
  const bool aligned = reinterpret_cast<uintptr_t>(data) % StDtypeSize(info.dtype) == 0;
  if (info.numel() == 0) return at::empty(info.shape, options);
  std::shared_ptr<const SafetensorsFile> keep = file;
  at::Tensor view = at::from_blob(
      data, info.shape, [keep](void*) mutable { keep.reset(); }, options);
  return aligned ? view : view.clone();
}

}  // namespace medq::engine
