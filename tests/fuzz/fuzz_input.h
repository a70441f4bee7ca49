// Helpers shared by the fuzz targets: the input as text, split in two, and a
// file holding it for parsers whose entry point is a path.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace medq::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The text before and after the first NUL byte (JSON text never holds a raw
// NUL, so one input can carry two JSON documents); the second part is empty
// when there is no NUL.
inline std::pair<std::string_view, std::string_view> SplitAtNul(std::string_view text) {
  const size_t nul = text.find('\0');
  if (nul == std::string_view::npos) return {text, {}};
  return {text.substr(0, nul), text.substr(nul + 1)};
}

// Stops the run as a finding: a parser broke a property its header promises.
[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "fuzz property failed: %s\n", what);
  std::abort();
}

// One in-memory file (memfd) for the whole run, rewritten with each input:
// the parsers under test open it by path like any model file, without disk
// I/O. Not thread-safe; libFuzzer runs inputs one at a time.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("medq-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) Fail("memfd_create");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the file's bytes with `bytes`; returns its path.
  const std::string& Write(std::string_view bytes) {
    if (ftruncate(fd_, 0) != 0) Fail("ftruncate");
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (n <= 0) Fail("pwrite");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

}  // namespace medq::fuzz
