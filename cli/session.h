// How every `medq` command reaches the daemon and reports failure.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/protocol.h"
#include "common/result.h"
#include "ipc/client.h"

namespace medq::cli {

// Flags every command accepts.
struct GlobalOptions {
  std::string socket;     // --socket or MEDQ_SOCKET; empty: the defaults
  double timeout_s = 30;  // --timeout: longest wait for a reply
  bool json = false;      // --json: print the daemon's reply as JSON
};

// Connects to --socket / MEDQ_SOCKET, else to the first default socket that
// exists (the user daemon's, then the system service's).
Result<ipc::Client> ConnectToDaemon(const GlobalOptions& options);

// Prints "medq: <message> [CODE]" (with the retry hint) to stderr and
// returns the exit status for the error's code.
int ReportError(const Error& error);

// Like ReportError for a daemon that cannot be reached (or went away): one
// line naming the socket and how to start medqd; returns 69.
int ReportUnreachable(const Error& error);

// One request, one reply: connects, calls `op`, prints the result through
// `format` (or as JSON with --json) to stdout, and returns 0, or the error's
// exit status. `status`, when given, picks the exit status of a result.
int RunOneShot(const GlobalOptions& options, std::string_view op, const Params& params,
               const std::function<std::string(const nlohmann::json&)>& format,
               const std::function<int(const nlohmann::json&)>& status = nullptr);

std::chrono::milliseconds TimeoutOf(const GlobalOptions& options);

}  // namespace medq::cli
