// Reading a model directory's safetensors: one model.safetensors, or shards
// listed by model.safetensors.index.json.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "common/result.h"

namespace medq::engine {

struct CheckpointTensor {
  at::Tensor tensor;  // CPU, zero-copy view of the file mapping (read-only)
  std::string file;   // the file it came from, for messages
};

// Opens and validates every file and returns every tensor by name. Failure:
// kInvalidRequest naming the file (and tensor): no weights file, a bad index,
// a tensor the index names missing from its shard, a name in two files, a
// corrupt file.
Result<std::map<std::string, CheckpointTensor>> ReadCheckpoint(const std::filesystem::path& dir);

// Removes `name` from `tensors` and stores it in *out as a contiguous tensor
// of `shape` in `dtype` on `device`. On the CPU a tensor already in `dtype`
// stays a view of the file mapping; a conversion is copied into
// EmptyHostWeight memory (host_memory.h). Failure: kInvalidRequest naming the
// tensor and its file: missing, of another shape, or not floating-point.
Status TakeTensor(std::map<std::string, CheckpointTensor>& tensors, const std::string& name,
                  at::IntArrayRef shape, at::Device device, at::ScalarType dtype, at::Tensor* out);

// Ok when every tensor left in `tensors` is one `ignorable` excuses (buffers
// transformers ignores too); otherwise kInvalidRequest naming up to five of
// the others with their files.
Status CheckNoneLeft(const std::map<std::string, CheckpointTensor>& tensors,
                     const std::function<bool(const std::string&)>& ignorable);

}  // namespace medq::engine
