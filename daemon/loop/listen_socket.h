// The daemon's listening Unix socket.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace medq::daemon {

// Creates the socket at `path` and listens on it:
//   - creates its directory (mode 0750) when missing;
//   - refuses (NOT_READY) when another live daemon answers on `path`;
//   - removes a stale socket left by a crashed daemon;
//   - binds, sets mode 0660 and, when `group` exists, group ownership.
struct ListeningSocket {
  int fd = -1;  // close-on-exec, owned by the caller
  std::string path;
  dev_t device = 0;  // identity of the socket file this process created
  ino_t inode = 0;
};
Result<ListeningSocket> OpenListeningSocket(const std::string& path, const std::string& group);

// Removes the socket file if it is still the one this process created, so
// that a successor's socket is never removed by mistake.
void RemoveListeningSocket(const ListeningSocket& socket);

}  // namespace medq::daemon
