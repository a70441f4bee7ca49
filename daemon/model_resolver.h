// Turns a model or adapter name from a request into a directory on disk,
// without ever leaving the models directory. Loop thread (filesystem only).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace medq::daemon {

class ModelResolver {
 public:
  // `models_dir`: where names are looked up. `allow_paths`: whether absolute
  // paths are accepted too.
  ModelResolver(std::filesystem::path models_dir, bool allow_paths)
      : models_dir_(std::move(models_dir)), allow_paths_(allow_paths) {}

  // The canonical directory `name` stands for:
  //   - a plain name ("Qwen2.5-0.5B-Instruct") is models_dir/name; names with
  //     "/" or that are "." or ".." are refused (MODEL_NOT_FOUND);
  //   - an absolute path only when paths are allowed (else PERMISSION_DENIED);
  //   - a name whose directory resolves (through symlinks) outside
  //     models_dir is refused with PERMISSION_DENIED;
  //   - a missing directory is MODEL_NOT_FOUND, naming what exists.
  // `what` ("model" or "adapter") names the kind in messages.
  Result<std::filesystem::path> Resolve(const std::string& name, const char* what) const;

  // The names of the directories directly inside models_dir, sorted.
  std::vector<std::string> Available() const;

  const std::filesystem::path& models_dir() const { return models_dir_; }

 private:
  std::filesystem::path models_dir_;
  bool allow_paths_;
};

}  // namespace medq::daemon
