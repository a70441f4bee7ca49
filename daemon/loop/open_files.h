// The open-file limit and what it allows: every client connection holds a
// descriptor, and so do model files while they load, the log, libuv's own
// handles and LibTorch's. A connection limit above the descriptor limit would
// turn the last connections into silent EOFs and a model load into a failure
// blamed on the client, so the daemon raises its soft limit as far as it may
// and keeps `max_connections` below what remains.
#pragma once

#include <cstdint>

namespace medq::daemon {

// Raises RLIMIT_NOFILE's soft limit to its hard limit; returns the soft limit
// in force afterwards.
uint64_t RaiseOpenFileLimit();

// Descriptors kept for everything but client connections: half the limit, at
// most 128.
uint64_t ReservedDescriptors(uint64_t open_file_limit);

// The most connections `open_file_limit` allows beside the reserve (at least 1).
int ConnectionsAllowed(int wanted, uint64_t open_file_limit);

}  // namespace medq::daemon
