#include "daemon/model_resolver.h"

#include <algorithm>
#include <array>

namespace medq::daemon {
namespace fs = std::filesystem;

namespace {

bool IsInside(const fs::path& child, const fs::path& parent) {
  auto [p, c] = std::mismatch(parent.begin(), parent.end(), child.begin(), child.end());
  return p == parent.end();
}

void AddSubdirectories(const fs::path& dir, std::vector<std::string>& names) {
  if (dir.empty()) return;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
  }
}

}  // namespace

fs::path BuiltinModelsDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  fs::path dir = fs::weakly_canonical(exe.parent_path() / ".." / "share" / "medq" / "models", ec);
  if (ec || !fs::is_directory(dir, ec)) return {};
  return dir;
}

Result<ModelName> SplitModelName(const std::string& name) {
  const size_t colon = name.rfind(':');
  // (A ':' in a folder of an absolute path is no suffix.)
  if (colon == std::string::npos || name.find('/', colon) != std::string::npos) {
    return ModelName{name, ""};
  }
  ModelName split{name.substr(0, colon), name.substr(colon + 1)};
  if (split.quantize != "none" && split.quantize != "int8" && split.quantize != "int4") {
    return InvalidField(
        "model", "params.model: \"" + Echo(name) +
                     "\" ends in a ':' suffix that is not a quantization: one of none, int8, int4 "
                     "(\"NAME:int4\" loads NAME with int4 weights)");
  }
  return split;
}

Result<fs::path> ModelResolver::Resolve(const std::string& name, const char* what) const {
  if (name.empty() || name.front() != '/') return ResolveName(name, what);
  if (!allow_paths_) {
    return Error(ErrorCode::kPermissionDenied,
                 std::string(what) +
                     " paths are not allowed by this daemon (allow_model_paths "
                     "is off); use a name from its models directory (medq models lists them)");
  }
  std::error_code ec;
  fs::path real = fs::canonical(name, ec);
  if (ec || !fs::is_directory(real, ec)) {
    return Error(ErrorCode::kModelNotFound, "no " + std::string(what) + " \"" + Echo(name) + "\"");
  }
  return real;
}

Result<fs::path> ModelResolver::ResolveName(const std::string& name, const char* what) const {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Error(ErrorCode::kModelNotFound, "invalid " + std::string(what) + " name \"" +
                                                Echo(name) +
                                                "\": use the name of a folder in the models "
                                                "directory");
  }
  for (const fs::path& root : std::array<fs::path, 2>{models_dir_, builtin_dir_}) {
    if (root.empty()) continue;
    std::error_code ec;
    const fs::path real = fs::canonical(root / name, ec);
    if (ec || !fs::is_directory(real, ec)) continue;
    const fs::path real_root = fs::canonical(root, ec);
    if (ec || !IsInside(real, real_root)) {
      return Error(ErrorCode::kPermissionDenied, std::string(what) + " \"" + Echo(name) +
                                                     "\" leads outside the models directory; "
                                                     "refused");
    }
    return real;
  }
  std::string msg = "no " + std::string(what) + " \"" + Echo(name) + "\" in the models directory";
  const std::vector<std::string> names = Available();
  if (names.empty()) {
    msg += " (it holds none)";
  } else {
    msg += "; available:";
    for (const std::string& n : names)
      msg += " " + n;
  }
  return Error(ErrorCode::kModelNotFound, msg);
}

std::vector<std::string> ModelResolver::Available() const {
  std::vector<std::string> names;
  AddSubdirectories(models_dir_, names);
  AddSubdirectories(builtin_dir_, names);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace medq::daemon
