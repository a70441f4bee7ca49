// Runs a real medqd for end-to-end tests: a private daemon on a socket in a
// fresh temporary directory, killed (SIGKILL) when the object goes away if it
// is still running.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace medq::test {

// Paths of the built binaries (from MEDQ_BINARY_DIR).
std::filesystem::path MedqdPath();
std::filesystem::path MedqPath();

class DaemonProcess {
 public:
  // Starts medqd with `--config <dir>/none.conf --socket <dir>/medq.sock`
  // (unless `extra_args` names its own --socket) plus `extra_args`, stderr to
  // <dir>/medqd.log, and waits until `health` says ready (or, without
  // `wait_until_ready`, merely answers); REQUIREs it within `startup`.
  // `open_file_limit`, when not 0, sets medqd's RLIMIT_NOFILE (soft and hard).
  explicit DaemonProcess(std::vector<std::string> extra_args = {},
                         std::chrono::milliseconds startup = std::chrono::seconds(30),
                         bool wait_until_ready = true, unsigned open_file_limit = 0);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& socket() const { return socket_; }
  const std::filesystem::path& dir() const { return dir_.path(); }
  pid_t pid() const { return pid_; }
  std::string Log() const;

  void Signal(int signum) const;
  // Waits for the daemon to exit; returns its exit status, or -1 when it was
  // still running after `timeout`, or 128+signal when a signal killed it.
  int Wait(std::chrono::milliseconds timeout);

 private:
  TempDir dir_;
  std::string socket_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Runs a program to completion, capturing its output.
struct ProcessResult {
  int status = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {},
                         const std::string& stdin_data = "");

// `medq --socket <socket> <args...>`.
ProcessResult RunMedq(const std::string& socket, const std::vector<std::string>& args);

}  // namespace medq::test
