// Where medq's Unix socket lives when nobody says otherwise.
#pragma once

#include <string>
#include <vector>

namespace medq::ipc {

// The system service's socket.
inline constexpr const char* kSystemSocketPath = "/run/medq/medq.sock";

// The daemon's default: $RUNTIME_DIRECTORY/medq.sock under systemd,
// /run/medq/medq.sock for root, else $XDG_RUNTIME_DIR/medq/medq.sock, else
// /tmp/medq-<uid>/medq.sock.
std::string DefaultDaemonSocketPath();

// Where a client looks, in order, when neither --socket nor MEDQ_SOCKET is
// given: the user daemon's socket, then the system service's.
std::vector<std::string> DefaultClientSocketPaths();

}  // namespace medq::ipc
