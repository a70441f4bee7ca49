#include "daemon/loop/listen_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace medq::daemon {
namespace {

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

Result<sockaddr_un> Address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Error(ErrorCode::kInvalidRequest,
                 "socket path is too long (" + std::to_string(path.size()) + " bytes): " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

// True when a daemon accepts connections on `path`.
bool SomeoneListens(const sockaddr_un& addr) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

}  // namespace

Result<ListeningSocket> OpenListeningSocket(const std::string& path, const std::string& group) {
  auto addr = Address(path);
  if (!addr.ok()) return std::move(addr).error();

  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      std::filesystem::create_directories(dir, ec);
      if (ec) {
        return Error(ErrorCode::kPermissionDenied,
                     "cannot create socket directory " + dir.string() + ": " + ec.message());
      }
      chmod(dir.c_str(), 0750);
    }
  }

  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return Error(ErrorCode::kInvalidRequest,
                   path + " exists and is not a socket; remove it or choose another --socket");
    }
    if (SomeoneListens(*addr)) {
      return Error(ErrorCode::kNotReady, "another medqd is already serving " + path +
                                             "; stop it first or choose another --socket");
    }
    spdlog::warn("removing stale socket {} left by a daemon that is gone", path);
    unlink(path.c_str());
  }

  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(ErrorCode::kInternal, Errno("socket"));
  // Bind with a restrictive umask so the socket never exists with wider modes.
  mode_t old_mask = umask(0117);
  int rc = bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  umask(old_mask);
  if (rc != 0) {
    std::string msg = Errno(("bind " + path).c_str());
    close(fd);
    return Error(errno == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kInternal, msg);
  }
  if (listen(fd, SOMAXCONN) != 0) {
    std::string msg = Errno("listen");
    close(fd);
    unlink(path.c_str());
    return Error(ErrorCode::kInternal, msg);
  }
  chmod(path.c_str(), 0660);
  if (struct group* gr = getgrnam(group.c_str()); gr != nullptr) {
    if (chown(path.c_str(), static_cast<uid_t>(-1), gr->gr_gid) != 0) {
      spdlog::warn("cannot give socket {} to group {}: {}", path, group, std::strerror(errno));
    }
  }
  ListeningSocket out;
  out.fd = fd;
  out.path = path;
  if (stat(path.c_str(), &st) == 0) {
    out.device = st.st_dev;
    out.inode = st.st_ino;
  }
  return out;
}

void RemoveListeningSocket(const ListeningSocket& socket) {
  struct stat on_disk {};
  if (stat(socket.path.c_str(), &on_disk) != 0) return;
  if (on_disk.st_ino == socket.inode && on_disk.st_dev == socket.device) {
    unlink(socket.path.c_str());
  }
}

}  // namespace medq::daemon
