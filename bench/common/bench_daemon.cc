#include "bench/common/bench_daemon.h"

#include <signal.h>
#include <spawn.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "ipc/client.h"

extern char** environ;

namespace medq::bench {

pid_t StartDaemon(const std::string& medqd, const std::string& socket,
                  const std::vector<std::string>& args) {
  const std::string state = std::filesystem::path(socket).replace_extension(".state").string();
  std::vector<std::string> all = {medqd,      "--socket",  socket,        "--state-dir", state,
                                  "--config", "/dev/null", "--log-level", "warn"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  for (int i = 0; i < 500; ++i) {
    if (auto c = ipc::Client::Connect(socket); c.ok() && c->Call("health").ok()) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  return -1;
}

}  // namespace medq::bench
