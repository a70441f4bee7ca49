#include "daemon/loop/loop_faults.h"

#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

namespace medq::daemon {

void LoopFaults::ThrowIfCompletionArmed(std::string_view op) {
  if (!completion_throw_) return;
  completion_throw_ = false;
  spdlog::warn("fault injection: the completion of {} throws", op);
  throw std::runtime_error("injected fault: the completion of " + std::string(op) + " threw");
}

}  // namespace medq::daemon
