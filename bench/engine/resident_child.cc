#include "bench/engine/resident_child.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string_view>

#include "common/write_all.h"

namespace medq::bench {
namespace {

// The next line of `lines`, reading `fd` into it until one is complete;
// nullopt at the end of input (or past the longest line).
std::optional<std::string> ReadLineFrom(int fd, ipc::LineBuffer& lines) {
  for (;;) {
    if (std::optional<std::string> line = lines.NextLine()) return line;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || !lines.Append(std::string_view(buf, static_cast<size_t>(n)))) {
      return std::nullopt;
    }
  }
}

}  // namespace

ResidentChild::ResidentChild(const std::vector<std::string>& argv) {
  int requests[2], replies[2];
  if (::pipe2(requests, O_CLOEXEC) != 0) return;
  if (::pipe2(replies, O_CLOEXEC) != 0) {
    ::close(requests[0]);
    ::close(requests[1]);
    return;
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    // Between fork and exec only async-signal-safe calls. dup2 clears
    // O_CLOEXEC on the copies; every other pipe end closes at exec.
    if (::dup2(requests[0], STDIN_FILENO) < 0 || ::dup2(replies[1], STDOUT_FILENO) < 0) {
      ::_exit(127);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(requests[0]);
  ::close(replies[1]);
  if (pid_ < 0) {
    ::close(requests[1]);
    ::close(replies[0]);
    return;
  }
  to_child_ = requests[1];
  from_child_ = replies[0];
}

ResidentChild::~ResidentChild() {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
}

std::optional<std::string> ResidentChild::Ask(const std::string& request) {
  if (to_child_ < 0) return std::nullopt;
  // A child that is gone must not kill the caller with SIGPIPE.
  const auto previous = std::signal(SIGPIPE, SIG_IGN);
  const bool sent = WriteAll(to_child_, request + "\n");
  std::signal(SIGPIPE, previous);
  if (!sent) return std::nullopt;
  return ReadLine();
}

std::optional<std::string> ResidentChild::ReadLine() {
  if (from_child_ < 0) return std::nullopt;
  return ReadLineFrom(from_child_, lines_);
}

std::optional<std::string> LineIo::Read() {
  return ReadLineFrom(in_, lines_);
}

bool LineIo::Write(const std::string& line) {
  return WriteAll(out_, line + "\n");
}

}  // namespace medq::bench
