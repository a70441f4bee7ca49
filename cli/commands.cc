#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "cli/format.h"
#include "common/messages.h"

namespace medq::cli {
namespace {

using nlohmann::json;

Action SetUpHealth(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(
        g, "health", json::object(),
        [](const json& r) { return FormatHealth(r.get<HealthInfo>()); },
        // Healthy: 0. Answering but not ready (starting, draining): 75.
        [](const json& r) { return r.value("ready", false) ? kExitOk : kExitTempFail; });
  };
}

Action SetUpQueue(CLI::App& sub, const GlobalOptions& g) {
  auto watch = std::make_shared<bool>(false);
  auto interval = std::make_shared<double>(1.0);
  sub.add_flag("-w,--watch", *watch, "Refresh until interrupted");
  sub.add_option("--interval", *interval, "Seconds between refreshes with --watch")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  return [&g, watch, interval] {
    auto format = [](const json& r) { return FormatQueue(r.get<QueueInfo>()); };
    if (!*watch) return RunOneShot(g, "queue", json::object(), format);
    const bool tty = isatty(STDOUT_FILENO) != 0;
    for (;;) {
      if (tty) std::cout << "\033[H\033[2J";  // home, clear screen
      int status = RunOneShot(g, "queue", json::object(), format);
      if (status != kExitOk) return status;
      std::this_thread::sleep_for(std::chrono::duration<double>(*interval));
    }
  };
}

Action SetUpCleanup(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "cleanup-memory", json::object(),
                      [](const json& r) { return FormatCleanup(r.get<CleanupInfo>()); });
  };
}

Action SetUpVersion(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "version", json::object(),
                      [](const json& r) { return FormatVersion(r.get<VersionInfo>()); });
  };
}

constexpr CommandSpec kCommands[] = {
    {"health", "Show the daemon's status, memory and limits; exit 0 when ready", &SetUpHealth},
    {"queue", "Show running and waiting jobs", &SetUpQueue},
    {"cleanup-memory", "Free cached GPU and host memory now", &SetUpCleanup},
    {"version", "Show the versions of medq and of the daemon", &SetUpVersion},
};

}  // namespace

std::span<const CommandSpec> Commands() {
  return kCommands;
}

}  // namespace medq::cli
