#include "daemon/loop/systemd.h"

#include <systemd/sd-daemon.h>

#include <cstdint>

namespace medq::daemon {

std::optional<int> SystemdListenFd() {
  int n = sd_listen_fds(/*unset_environment=*/1);
  if (n < 1) return std::nullopt;
  const int fd = SD_LISTEN_FDS_START;
  if (sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) <= 0) return std::nullopt;
  return fd;
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
