#include "daemon/uv_guard.h"

#include <spdlog/spdlog.h>

namespace medq::daemon {

void LogEscapedException(const char* what, const char* message) noexcept {
  try {
    spdlog::error("{} failed with an unexpected exception: {}; the daemon goes on", what, message);
  } catch (...) {
    // Logging itself failed (out of memory): nothing is left to tell.
  }
}

}  // namespace medq::daemon
