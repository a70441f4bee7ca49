#include "common/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace medq {

Error FileError(const std::filesystem::path& path, int err, const char* verb) {
  std::string message =
      std::string("cannot ") + verb + " " + path.string() + ": " + std::strerror(err);
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

Result<std::string> ReadWholeFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError(path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    return FileError(path, err, "read");
  }
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
