#include "daemon/worker/stop_strings.h"

#include <algorithm>
#include <utility>

namespace medq::daemon {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of `stop`.
size_t PartialMatch(std::string_view text, std::string_view stop) {
  for (size_t len = std::min(text.size(), stop.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == stop.substr(0, len)) return len;
  }
  return 0;
}

}  // namespace

std::string StopStrings::Push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  if (stops_.empty()) return std::exchange(pending_, {});
  size_t first = std::string::npos;
  for (const std::string& stop : stops_)
    first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  size_t hold = 0;
  for (const std::string& stop : stops_)
    hold = std::max(hold, PartialMatch(pending_, stop));
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStrings::Finish() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace medq::daemon
