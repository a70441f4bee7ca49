// Logging to stderr through spdlog. Under systemd (JOURNAL_STREAM set) lines
// carry a syslog priority prefix ("<6>") and no timestamp of their own, since
// the journal adds both.
#pragma once

#include <string>

namespace medq::daemon {

// Installs the default logger. Call once, first thing in main. Returns false
// for an unknown level name (the level is then left at info).
bool SetUpLogging(const std::string& level);

// Changes the level at run time (SIGHUP reload). Same level names.
bool SetLogLevel(const std::string& level);

}  // namespace medq::daemon
