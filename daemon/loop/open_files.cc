#include "daemon/loop/open_files.h"

#include <sys/resource.h>

#include <algorithm>

namespace medq::daemon {

uint64_t RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

uint64_t ReservedDescriptors(uint64_t open_file_limit) {
  return std::min<uint64_t>(128, open_file_limit / 2);
}

int ConnectionsAllowed(int wanted, uint64_t open_file_limit) {
  const uint64_t room = open_file_limit - ReservedDescriptors(open_file_limit);
  return static_cast<int>(
      std::clamp<uint64_t>(room, 1, static_cast<uint64_t>(std::max(wanted, 1))));
}

}  // namespace medq::daemon
