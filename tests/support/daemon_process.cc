#include "tests/support/daemon_process.h"

#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "ipc/client.h"

namespace medq::test {
namespace {

int StatusOf(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return -1;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::filesystem::path MedqdPath() {
  return std::filesystem::path(MEDQ_BINARY_DIR) / "daemon/medqd";
}
std::filesystem::path MedqPath() {
  return std::filesystem::path(MEDQ_BINARY_DIR) / "cli/medq";
}

DaemonProcess::DaemonProcess(std::vector<std::string> extra_args, std::chrono::milliseconds startup,
                             bool wait_until_ready, unsigned open_file_limit) {
  socket_ = (dir_.path() / "medq.sock").string();
  std::vector<std::string> argv = {MedqdPath().string(), "--config",
                                   (dir_.path() / "none.conf").string()};
  for (size_t i = 0; i + 1 < extra_args.size(); ++i) {
    if (extra_args[i] == "--socket") socket_ = extra_args[i + 1];
  }
  if (socket_ == (dir_.path() / "medq.sock").string()) {
    argv.insert(argv.end(), {"--socket", socket_});
  }
  // Each daemon its own job store (one store serves one daemon at a time).
  if (std::find(extra_args.begin(), extra_args.end(), "--state-dir") == extra_args.end()) {
    argv.insert(argv.end(), {"--state-dir", (dir_.path() / "state").string()});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  // The device-loop leg of scripts/test: every daemon runs models on the CPU
  // through the loop a GPU takes.
  if (const char* v = std::getenv("MEDQ_TEST_DEVICE_LOOP_ON_CPU");
      v != nullptr && v == std::string("1")) {
    argv.push_back("--test-device-loop-on-cpu");
  }
  std::ofstream(dir_.path() / "none.conf").flush();  // empty: keep /etc/medq out of tests
  const std::string log = (dir_.path() / "medqd.log").string();
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    dup2(fd, STDOUT_FILENO);
    if (open_file_limit != 0) {
      const rlimit limit{open_file_limit, open_file_limit};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    auto args = CStrings(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + startup;
  while (std::chrono::steady_clock::now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      reaped_ = true;
      FAIL("medqd exited during startup with status " << StatusOf(wstatus) << ":\n" << Log());
    }
    if (auto client = ipc::Client::Connect(socket_); client.ok()) {
      auto reply = client->Call("health", {}, std::chrono::seconds(5));
      if (reply.ok() && (!wait_until_ready || (*reply)["result"].value("ready", false))) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("medqd did not answer within " << startup.count() << " ms:\n" << Log());
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string DaemonProcess::Log() const {
  std::ifstream in(dir_.path() / "medqd.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void DaemonProcess::Signal(int signum) const {
  kill(pid_, signum);
}

int DaemonProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int wstatus = 0;
    if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      reaped_ = true;
      return StatusOf(wstatus);
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ProcessResult RunProcess(const std::vector<std::string>& argv_in,
                         const std::vector<std::string>& extra_env, const std::string& stdin_data) {
  int out_pipe[2], err_pipe[2], in_pipe[2];
  REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(in_pipe, O_CLOEXEC) == 0);
  std::vector<std::string> argv = argv_in;
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    dup2(in_pipe[0], STDIN_FILENO);
    for (const std::string& e : extra_env)
      putenv(const_cast<char*>(e.c_str()));
    auto args = CStrings(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  if (!stdin_data.empty()) {
    ssize_t ignored = write(in_pipe[1], stdin_data.data(), stdin_data.size());
    (void)ignored;
  }
  close(in_pipe[1]);
  ProcessResult r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    poll(fds, 2, -1);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  r.status = StatusOf(wstatus);
  return r;
}

ProcessResult RunMedq(const std::string& socket, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MedqPath().string(), "--socket", socket};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv);
}

}  // namespace medq::test
