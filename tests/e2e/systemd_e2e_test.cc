// medqd under systemd: socket activation, readiness and the watchdog, with
// this test playing systemd's part.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <mutex>
#include <thread>

#include "ipc/client.h"
#include "tests/support/daemon_process.h"

namespace medq::test {
namespace {

using namespace std::chrono_literals;

int BoundSocket(const std::string& path, int type) {
  int fd = socket(AF_UNIX, type, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

// Plays systemd's notify socket: keeps reading datagrams (the daemon's
// sd_notify blocks when nobody reads) and records them.
class NotifyListener {
 public:
  explicit NotifyListener(int fd) : fd_(fd), reader_([this] { Read(); }) {}
  ~NotifyListener() {
    stop_ = true;
    reader_.join();
    close(fd_);
  }
  bool Await(const std::string& what, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (seen_.find(what) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  void Read() {
    while (!stop_) {
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, 50) <= 0) continue;
      char buf[1024];
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      std::lock_guard lock(mu_);
      if (n > 0) seen_.append(buf, static_cast<size_t>(n)).append("\n");
    }
  }

  int fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string seen_;
  std::thread reader_;
};

}  // namespace

TEST_CASE("medqd serves the socket systemd passes and notifies readiness", "[e2e]") {
  TempDir dir;
  const std::string path = (dir.path() / "activated.sock").string();
  const std::string notify_path = (dir.path() / "notify").string();
  int listen_fd = BoundSocket(path, SOCK_STREAM);
  REQUIRE(listen(listen_fd, 16) == 0);
  NotifyListener notify(BoundSocket(notify_path, SOCK_DGRAM));

  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(listen_fd, 3);
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    setenv("NOTIFY_SOCKET", notify_path.c_str(), 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
    // --socket names a path nobody binds: the passed socket must be used.
    execl(MedqdPath().c_str(), "medqd", "--config", "/dev/null", "--socket",
          (dir.path() / "unused.sock").c_str(), "--state-dir", (dir.path() / "state").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(listen_fd);

  CHECK(notify.Await("READY=1", 20s));
  auto client = ipc::Client::Connect(path);
  REQUIRE(client.ok());
  auto reply = client->Call("health", {}, 5s);
  REQUIRE(reply.ok());
  CHECK((*reply)["result"]["ready"] == true);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "unused.sock"));
  CHECK(notify.Await("WATCHDOG=1", 5s));

  kill(pid, SIGTERM);
  CHECK(notify.Await("STOPPING=1", 5s));
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // systemd owns the socket file: the daemon leaves it in place.
  CHECK(std::filesystem::exists(path));
}

}  // namespace medq::test
