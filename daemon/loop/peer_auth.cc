#include "daemon/loop/peer_auth.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace medq::daemon {

std::optional<PeerCredentials> PeerOf(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

PeerPolicy::PeerPolicy(const std::string& group) : own_uid_(getuid()) {
  if (struct group* gr = getgrnam(group.c_str()); gr != nullptr) gid_ = gr->gr_gid;
}

bool PeerPolicy::Allows(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == own_uid_) return true;
  if (!gid_) return false;
  if (peer.gid == *gid_) return true;
  // Supplementary groups of the peer's user.
  struct passwd* pw = getpwuid(peer.uid);
  if (pw == nullptr) return false;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &count) < 0) return false;
  }
  for (int i = 0; i < count; ++i) {
    if (groups[static_cast<size_t>(i)] == *gid_) return true;
  }
  return false;
}

}  // namespace medq::daemon
