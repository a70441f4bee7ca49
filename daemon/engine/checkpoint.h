// Reading a model directory's safetensors: one model.safetensors, or shards
// listed by model.safetensors.index.json.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
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

}  // namespace medq::engine
