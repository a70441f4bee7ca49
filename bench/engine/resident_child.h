// A measuring child process that stays up between measurements. InChild
// (in_child.h) forks a child per measurement, and its exit frees the model's
// copy of the weights; a VM that hands freed memory back to its host then
// runs slower for some seconds, so the next measurement had to wait them
// out, and measurements meant to be compared ended up a minute apart. A
// resident child loads once and answers request after request, so that two
// sides of a comparison can run back to back. It is a program of its own
// (executed, not only forked), so that it starts as fresh a process as a
// daemon it is compared with.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "ipc/line_buffer.h"

namespace medq::bench {

// The longest request or reply line, without its newline.
inline constexpr size_t kMaxChildLine = 64 * 1024;

class ResidentChild {
 public:
  // Runs the program argv[0] with `argv`, its standard input and output
  // pipes from and to this object: it reads request lines from its input
  // and writes one reply line per request (LineIo below), until its input
  // ends. When it cannot be started, Ask and ReadLine give nullopt.
  explicit ResidentChild(const std::vector<std::string>& argv);
  // Ends the child's input and waits for it to exit.
  ~ResidentChild();
  ResidentChild(const ResidentChild&) = delete;
  ResidentChild& operator=(const ResidentChild&) = delete;

  // Sends one request line (no newline in it) and returns the child's reply
  // line, or nullopt when the child is gone.
  std::optional<std::string> Ask(const std::string& request);
  // The child's next line without a request (its first, "ready" say).
  std::optional<std::string> ReadLine();

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  ipc::LineBuffer lines_{kMaxChildLine};
};

// Line input and output on a pair of fds, for the child's side.
class LineIo {
 public:
  LineIo(int in, int out) : in_(in), out_(out) {}
  // The next line without its newline; nullopt at the end of input.
  std::optional<std::string> Read();
  // Writes `line` and a newline; false when the reader is gone.
  bool Write(const std::string& line);

 private:
  int in_, out_;
  ipc::LineBuffer lines_{kMaxChildLine};
};

}  // namespace medq::bench
