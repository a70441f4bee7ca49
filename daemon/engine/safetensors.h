// Reading safetensors files: memory-mapped, with the header validated in full
// before any tensor byte is touched. Free of LibTorch (see tensor_view.h for
// the zero-copy bridge to at::Tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace medq::engine {

// The element types a safetensors header may name that the engine accepts.
enum class StDtype { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32" -> kF32 etc.; returns false (and leaves *out alone) for an unknown name.
bool ParseStDtype(std::string_view name, StDtype* out);
std::string_view StDtypeName(StDtype dtype);
size_t StDtypeSize(StDtype dtype);

struct StTensorInfo {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets relative to the start of the data section
  size_t end = 0;
  int64_t numel() const;
};

// One opened safetensors file. Immutable once opened; the mapping lives as long
// as the object (share it with shared_ptr to keep tensors built over it valid).
// Thread-safety: const methods may be called from any thread.
class SafetensorsFile {
 public:
  // Largest header accepted: real headers are a few hundred KiB at most.
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  // Maps `path` read-only and validates its header: length inside the file and
  // under kMaxHeaderBytes, well-formed JSON object, known dtypes, non-negative
  // shapes, dtype size × shape == byte range, ranges inside the data section
  // and not overlapping. Failure: kModelNotFound when the file is missing,
  // kInvalidRequest naming the file (and the tensor) otherwise.
  static Result<std::shared_ptr<const SafetensorsFile>> Open(const std::filesystem::path& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Tensors in file order (sorted by begin offset).
  const std::vector<StTensorInfo>& tensors() const { return tensors_; }
  // nullptr when the file has no tensor of that name.
  const StTensorInfo* Find(std::string_view name) const;
  // Start of the tensor's bytes inside the mapping; valid while *this lives.
  const std::byte* Data(const StTensorInfo& info) const { return data_ + info.begin; }

 private:
  SafetensorsFile() = default;

  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;
  std::vector<StTensorInfo> tensors_;
};

// One tensor to write: `data` holds exactly numel × dtype size bytes.
struct StWriteTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes a safetensors file (header padded to 8 bytes, tensors in the given
// order). Used by tests and the benchmark to build model directories.
// Failure: kInternal naming the path when it cannot be written, kInvalidRequest
// when a tensor's byte count does not match its dtype and shape.
Status WriteSafetensors(const std::filesystem::path& path,
                        const std::vector<StWriteTensor>& tensors);

}  // namespace medq::engine
