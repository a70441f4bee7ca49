// The daemon's side of systemd's protocols: socket activation (LISTEN_FDS),
// readiness and stopping notifications (Type=notify) and the watchdog. Every
// function is a no-op when the daemon was not started by systemd, so medqd
// runs the same standalone.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace medq::daemon {

// The listening Unix stream socket systemd passed (the first of LISTEN_FDS),
// or nullopt when none was passed. Unsets the LISTEN_* variables.
std::optional<int> SystemdListenFd();

void NotifyReady(const std::string& status);
void NotifyStopping();

// How often to ping the watchdog (half of WatchdogSec), or nullopt when the
// watchdog is off.
std::optional<std::chrono::milliseconds> WatchdogPingInterval();
void NotifyWatchdog();

}  // namespace medq::daemon
