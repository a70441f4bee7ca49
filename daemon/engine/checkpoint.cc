#include "daemon/engine/checkpoint.h"

#include <set>

#include <nlohmann/json.hpp>

#include "daemon/engine/host_memory.h"
#include "daemon/engine/model_config.h"
#include "daemon/engine/safetensors.h"
#include "daemon/engine/tensor_view.h"

namespace medq::engine {
namespace {

std::string ShapeString(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Adds every tensor of `path` to `out`; `expected` (may be null) lists the
// names the index assigns to this file, which must all be present.
Status AddFile(const std::filesystem::path& path, const std::set<std::string>* expected,
               std::map<std::string, CheckpointTensor>* out) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) {
    Error e = file.error();
    if (e.code == ErrorCode::kModelNotFound) e.code = ErrorCode::kInvalidRequest;
    return e;
  }
  const std::string name = path.filename().string();
  for (const auto& info : (*file)->tensors()) {
    if (out->count(info.name) != 0) {
      return InvalidRequest("tensor '" + info.name + "' appears in both " + (*out)[info.name].file +
                            " and " + path.string());
    }
    (*out)[info.name] = CheckpointTensor{TensorView(*file, info), path.string()};
  }
  if (expected != nullptr) {
    for (const auto& t : *expected) {
      if ((*file)->Find(t) == nullptr) {
        return InvalidRequest("tensor '" + t + "' is listed in model.safetensors.index.json for " +
                              path.string() + " but that file does not hold it");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::map<std::string, CheckpointTensor>> ReadCheckpoint(const std::filesystem::path& dir) {
  std::map<std::string, CheckpointTensor> out;
  std::error_code ec;
  const auto single = dir / "model.safetensors";
  const auto index_path = dir / "model.safetensors.index.json";
  if (std::filesystem::exists(single, ec)) {
    const Status s = AddFile(single, nullptr, &out);
    if (!s.ok()) return s.error();
    return out;
  }
  if (!std::filesystem::exists(index_path, ec)) {
    return InvalidRequest("model directory " + dir.string() +
                          " has neither model.safetensors nor model.safetensors.index.json");
  }
  auto index = ReadJsonFile(index_path);
  if (!index.ok()) return index.error();
  const auto map = index->find("weight_map");
  if (!index->is_object() || map == index->end() || !map->is_object()) {
    return InvalidRequest(index_path.string() + " has no 'weight_map' object");
  }
  std::map<std::string, std::set<std::string>> by_file;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string())
      return InvalidRequest(index_path.string() + ": '" + tensor + "' maps to a non-string");
    const std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return InvalidRequest(index_path.string() + ": shard name '" + f + "' for '" + tensor +
                            "' is not a file name in the model directory");
    }
    by_file[f].insert(tensor);
  }
  if (by_file.empty()) return InvalidRequest(index_path.string() + " lists no tensors");
  for (const auto& [file, names] : by_file) {
    const Status s = AddFile(dir / file, &names, &out);
    if (!s.ok()) return s.error();
  }
  return out;
}

Status TakeTensor(std::map<std::string, CheckpointTensor>& tensors, const std::string& name,
                  at::IntArrayRef shape, at::Device device, at::ScalarType dtype, at::Tensor* out) {
  const auto it = tensors.find(name);
  if (it == tensors.end()) {
    return InvalidRequest(
        "tensor '" + name +
        "' is missing from the model's safetensors; the checkpoint does not match "
        "its config.json");
  }
  const at::Tensor& t = it->second.tensor;
  if (t.sizes() != shape) {
    return InvalidRequest("tensor '" + name + "' in " + it->second.file + " has shape " +
                          ShapeString(t.sizes()) + ", config.json implies " + ShapeString(shape));
  }
  if (!at::isFloatingType(t.scalar_type())) {
    return InvalidRequest("tensor '" + name + "' in " + it->second.file +
                          " is not a floating-point tensor");
  }
  if (device.is_cpu() && (t.scalar_type() != dtype || !t.is_contiguous())) {
    // A copy either way: into memory that decode streams fastest.
    *out = EmptyHostWeight(t.sizes(), dtype);
    out->copy_(t);
  } else {
    *out = t.to(device, dtype).contiguous();  // the mapping as it is, or a copy on the GPU
  }
  tensors.erase(it);
  return Status::Ok();
}

Status CheckNoneLeft(const std::map<std::string, CheckpointTensor>& tensors,
                     const std::function<bool(const std::string&)>& ignorable) {
  std::string left;
  int count = 0;
  for (const auto& [name, t] : tensors) {
    if (ignorable(name)) continue;
    if (++count <= 5) left += (left.empty() ? "'" : ", '") + name + "' (" + t.file + ")";
  }
  if (count == 0) return Status::Ok();
  return InvalidRequest(std::to_string(count) + " unexpected tensor(s) in the checkpoint: " + left +
                        (count > 5 ? ", ..." : "") +
                        "; the weights do not match the architecture in config.json");
}

}  // namespace medq::engine
