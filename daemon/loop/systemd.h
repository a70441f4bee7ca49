// The daemon's side of systemd's protocols: socket activation (LISTEN_FDS),
// readiness and stopping notifications (Type=notify) and the watchdog. Every
// function is a no-op when the daemon was not started by systemd, so medqd
// runs the same standalone.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace medq::daemon {

// The listening sockets systemd passed (LISTEN_FDS): `socket`, the first
// Unix stream socket not named "http"; `http`, the one named "http"
// (FileDescriptorName=http), for the HTTP endpoint. Unsets the LISTEN_*
// variables.
struct SystemdSockets {
  std::optional<int> socket;
  std::optional<int> http;
};
SystemdSockets SystemdListenFds();

void NotifyReady(const std::string& status);
void NotifyStopping();

// How often to ping the watchdog (half of WatchdogSec), or nullopt when the
// watchdog is off.
std::optional<std::chrono::milliseconds> WatchdogPingInterval();
void NotifyWatchdog();

}  // namespace medq::daemon
