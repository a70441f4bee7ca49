#include "ipc/socket_path.h"

#include <unistd.h>

#include <cstdlib>

namespace medq::ipc {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string UserSocketPath() {
  if (std::string xdg = Env("XDG_RUNTIME_DIR"); !xdg.empty()) return xdg + "/medq/medq.sock";
  return "/tmp/medq-" + std::to_string(getuid()) + "/medq.sock";
}

}  // namespace

std::string DefaultDaemonSocketPath() {
  if (std::string rt = Env("RUNTIME_DIRECTORY"); !rt.empty()) {
    // systemd may pass several directories separated by ':'; the first is ours.
    return rt.substr(0, rt.find(':')) + "/medq.sock";
  }
  if (getuid() == 0) return kSystemSocketPath;
  return UserSocketPath();
}

std::vector<std::string> DefaultClientSocketPaths() {
  if (getuid() == 0) return {kSystemSocketPath};
  return {UserSocketPath(), kSystemSocketPath};
}

}  // namespace medq::ipc
