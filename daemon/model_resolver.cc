#include "daemon/model_resolver.h"

#include <algorithm>

namespace medq::daemon {
namespace fs = std::filesystem;

namespace {

bool IsInside(const fs::path& child, const fs::path& parent) {
  auto [p, c] = std::mismatch(parent.begin(), parent.end(), child.begin(), child.end());
  return p == parent.end();
}

}  // namespace

Result<fs::path> ModelResolver::Resolve(const std::string& name, const char* what) const {
  std::error_code ec;
  fs::path candidate;
  bool from_models_dir = true;
  if (!name.empty() && name.front() == '/') {
    if (!allow_paths_) {
      return Error(ErrorCode::kPermissionDenied,
                   std::string(what) +
                       " paths are not allowed by this daemon (allow_model_paths "
                       "is off); use a name from its models directory " +
                       models_dir_.string());
    }
    candidate = name;
    from_models_dir = false;
  } else {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      return Error(ErrorCode::kModelNotFound, "invalid " + std::string(what) + " name \"" + name +
                                                  "\": use the name of a folder in " +
                                                  models_dir_.string());
    }
    candidate = models_dir_ / name;
  }
  fs::path real = fs::canonical(candidate, ec);
  if (ec || !fs::is_directory(real, ec)) {
    std::string msg = "no " + std::string(what) + " \"" + name + "\"";
    if (from_models_dir) {
      std::vector<std::string> names = Available();
      msg += " in " + models_dir_.string();
      if (names.empty()) {
        msg += " (it holds none)";
      } else {
        msg += "; available:";
        for (const std::string& n : names)
          msg += " " + n;
      }
    }
    return Error(ErrorCode::kModelNotFound, msg);
  }
  if (from_models_dir) {
    fs::path root = fs::canonical(models_dir_, ec);
    if (ec || !IsInside(real, root)) {
      return Error(ErrorCode::kPermissionDenied, std::string(what) + " \"" + name +
                                                     "\" leads outside the models directory " +
                                                     models_dir_.string() + "; refused");
    }
  }
  return real;
}

std::vector<std::string> ModelResolver::Available() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(models_dir_, ec)) {
    if (entry.is_directory(ec)) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace medq::daemon
