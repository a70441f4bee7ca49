// Writing a whole buffer to a pipe or file descriptor: the job store's mark
// (daemon/store/store_mark.cc) and the benchmarks' children answering their
// parents (bench/engine/in_child.h, bench/engine/resident_child.cc).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace medq {

// Writes all of `text` to `fd`, again after a short write or a signal;
// false when the reader is gone or the write fails.
inline bool WriteAll(int fd, std::string_view text) {
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace medq
