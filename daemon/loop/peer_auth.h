// Who may use the daemon: its own user, root, and members of one group.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace medq::daemon {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The credentials of the process at the other end of a Unix socket
// (SO_PEERCRED); nullopt when the kernel does not say.
std::optional<PeerCredentials> PeerOf(int fd);

class PeerPolicy {
 public:
  // `group`: the group whose members are allowed; it may not exist, in which
  // case only the daemon's user and root are.
  explicit PeerPolicy(const std::string& group);

  // True for the daemon's own uid, root, and members of the group (primary
  // or supplementary). Reads the group database; call at accept time only.
  bool Allows(const PeerCredentials& peer) const;

 private:
  uid_t own_uid_;
  std::optional<gid_t> gid_;
};

}  // namespace medq::daemon
