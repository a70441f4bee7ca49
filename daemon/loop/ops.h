// The daemon's operations, in one table: name, handler, one-line summary.
// The table is the only place an op is registered and the socket's one
// dispatch (server/server.cc looks ops up here); `medq --help` and the man
// pages list the same ops (`medq template` runs apply-template), and
// docs/protocol.md documents each one. A handler parses its params and calls
// a typed entry point (entry_points.h) or the Scheduler; the HTTP routes call
// the same entry points without this table.
#pragma once

#include <span>
#include <string_view>

#include "common/protocol.h"
#include "daemon/loop/responder.h"
#include "daemon/loop/state.h"

namespace medq::daemon {

// A handler validates its params, then answers through `reply` at once or
// later (after worker work). It runs on the loop thread and must not block.
// A user-facing failure is reply.Fail(Error); exceptions are bugs, caught
// once at dispatch and answered INTERNAL.
using OpHandler = void (*)(DaemonState& state, const Request& request, Responder reply);

struct OpSpec {
  std::string_view name;
  OpHandler handler;
  std::string_view summary;
  bool starts_work;  // refused with NOT_READY while the daemon drains
};

std::span<const OpSpec> Ops();
const OpSpec* FindOp(std::string_view name);

}  // namespace medq::daemon
