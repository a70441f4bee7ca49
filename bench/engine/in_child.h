// Runs a measurement in a child process: the engine's process-wide state
// (its worker thread's settings, LibTorch's allocator) and its peak RSS are
// the child's own, and the parent never touches LibTorch.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/write_all.h"

namespace medq::bench {

// Forks, runs `fn` in the child, returns its JSON plus the child's peak RSS.
template <typename Fn>
nlohmann::json InChild(Fn fn) {
  int fds[2];
  if (::pipe(fds) != 0) return nlohmann::json{{"error", "pipe failed"}};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    WriteAll(fds[1], fn().dump());  // a short reply is the parent's parse error
    ::close(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  nlohmann::json out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded()) out = {{"error", "child failed, status " + std::to_string(status)}};
  out["peak_rss_bytes"] = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  return out;
}

}  // namespace medq::bench
