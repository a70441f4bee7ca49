// The daemon's operations, in one table: name, handler, one-line summary.
// The table is the only place an op is registered; `medq --help` and the man
// pages list the same ops, and docs/protocol.md documents each one.
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
