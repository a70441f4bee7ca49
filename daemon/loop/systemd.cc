#include "daemon/loop/systemd.h"

#include <systemd/sd-daemon.h>

#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace medq::daemon {

SystemdSockets SystemdListenFds() {
  SystemdSockets out;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(/*unset_environment=*/1, &names);
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    const bool http = names != nullptr && std::strcmp(names[i], "http") == 0;
    if (http && !out.http && sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, /*listening=*/1) > 0) {
      out.http = fd;
    } else if (!http && !out.socket &&
               sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) > 0) {
      out.socket = fd;
    }
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i)
      std::free(names[i]);
    std::free(names);
  }
  return out;
}

void NotifyReady(const std::string& status) {
  sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
}

void NotifyStopping() {
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
}

std::optional<std::chrono::milliseconds> WatchdogPingInterval() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::milliseconds(usec / 2000);
}

void NotifyWatchdog() {
  sd_notify(0, "WATCHDOG=1");
}

}  // namespace medq::daemon
