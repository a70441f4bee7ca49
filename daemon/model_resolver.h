// Turns a model or adapter name from a request into a directory on disk,
// without ever leaving the models directories. Loop thread (filesystem only).
// Its errors reach clients, HTTP ones included: they name the request's own
// value (capped, Echo) and the models available, never the daemon's paths.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace medq::daemon {

// The name of the demo model that ships with medq (models/medq-demo in the
// source tree): the default `model` when the configuration names none.
inline constexpr const char* kBuiltinModelName = "medq-demo";

// Where the models that ship with medq are: share/medq/models beside the
// executable's bin/ or sbin/ folder (/usr/share/medq/models for the package;
// build/share/medq/models in a build tree, which CMake fills). Empty when
// that folder does not exist.
std::filesystem::path BuiltinModelsDir();

// A generation model's name may end in ":none", ":int8" or ":int4": the
// quantization that model is loaded with (LoadOptions::quantize), over the
// daemon's `quantize`, wherever a model is named (config `model` and
// `preload`, a request's `model`, `load`, `unload`). "qwen:int4" is then a
// model of its own beside "qwen" (both may be loaded); its folder is
// "qwen"'s.
struct ModelName {
  std::string folder;    // the name without its suffix
  std::string quantize;  // "none", "int8", "int4", or "" without a suffix
};

// Splits `name` at its last ':' (none, or a '/' after it: {name, ""}). Failure: INVALID_REQUEST
// naming params.model when what follows the ':' is not one of none, int8,
// int4 (so that a folder's name cannot hold a ':').
Result<ModelName> SplitModelName(const std::string& name);

class ModelResolver {
 public:
  // `models_dir`: where names are looked up first. `allow_paths`: whether
  // absolute paths are accepted too. `builtin_dir` (may be empty): where a
  // name not found in models_dir is looked up next (read-only models that
  // ship with medq); a folder in models_dir shadows a built-in one.
  ModelResolver(std::filesystem::path models_dir, bool allow_paths,
                std::filesystem::path builtin_dir = {})
      : models_dir_(std::move(models_dir)),
        allow_paths_(allow_paths),
        builtin_dir_(std::move(builtin_dir)) {}

  // The canonical directory `name` stands for:
  //   - a plain name ("Qwen2.5-0.5B-Instruct") is models_dir/name, else
  //     builtin_dir/name; names with "/" or that are "." or ".." are refused
  //     (MODEL_NOT_FOUND);
  //   - an absolute path only when paths are allowed (else PERMISSION_DENIED);
  //   - a name whose directory resolves (through symlinks) outside the
  //     directory it was found in is refused with PERMISSION_DENIED;
  //   - a missing directory is MODEL_NOT_FOUND, naming what exists.
  // `what` ("model" or "adapter") names the kind in messages.
  Result<std::filesystem::path> Resolve(const std::string& name, const char* what) const;

  // The names of the directories directly inside models_dir and builtin_dir,
  // sorted, each once.
  std::vector<std::string> Available() const;

  const std::filesystem::path& models_dir() const { return models_dir_; }
  const std::filesystem::path& builtin_dir() const { return builtin_dir_; }

 private:
  Result<std::filesystem::path> ResolveName(const std::string& name, const char* what) const;

  std::filesystem::path models_dir_;
  bool allow_paths_;
  std::filesystem::path builtin_dir_;
};

}  // namespace medq::daemon
