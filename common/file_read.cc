#include "common/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace medq {

std::string ModelFileName(const std::filesystem::path& path) {
  const std::filesystem::path folder = path.parent_path().filename();
  return (folder.empty() ? path.filename() : folder / path.filename()).string();
}

Error FileError(const std::filesystem::path& path, int err, const char* verb) {
  std::string message =
      std::string("cannot ") + verb + " " + ModelFileName(path) + ": " + std::strerror(err);
  switch (err) {
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return Error(ErrorCode::kNotReady,
                   message + " (medqd is short of file descriptors or memory; retry shortly)", 1.0);
    case EIO:
      return Error(ErrorCode::kInternal, std::move(message));
    default:
      return Error(ErrorCode::kInvalidRequest, std::move(message));
  }
}

Result<int> OpenRegularFile(const std::filesystem::path& path, struct stat* st_out) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer,
  // holding the thread (libuv's file pool, the worker) forever. On a regular
  // file the flag changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return FileError(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return FileError(path, err, "read");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) return FileError(path, EISDIR, "read");
    return Error(ErrorCode::kInvalidRequest,
                 "cannot read " + ModelFileName(path) +
                     ": not a regular file (a FIFO, socket or device); a model folder's files "
                     "must be regular files");
  }
  if (st_out != nullptr) *st_out = st;
  return fd;
}

Result<std::string> ReadWholeFile(const std::filesystem::path& path) {
  struct stat st {};
  auto opened = OpenRegularFile(path, &st);
  if (!opened.ok()) return opened.error();
  const int fd = *opened;
  std::string text;
  text.reserve(static_cast<size_t>(st.st_size));
  char chunk[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return FileError(path, err, "read");
    }
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace medq
