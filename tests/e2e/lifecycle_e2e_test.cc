// Starting, stopping and guarding the daemon.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"

namespace medq::test {

using nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("SIGTERM drains: clients are closed cleanly and the socket goes", "[e2e]") {
  DaemonProcess d;
  RawClient c(d.socket());
  CHECK(c.Roundtrip(R"({"v":1,"id":1,"op":"cleanup-memory"})"
                    "\n")["event"] == "result");
  d.Signal(SIGTERM);
  CHECK(c.WaitClosed(10s));
  CHECK(d.Wait(15s) == 0);
  CHECK_FALSE(std::filesystem::exists(d.socket()));
  CHECK_THAT(d.Log(), Catch::Contains("draining"));
}

TEST_CASE("SIGINT stops the daemon cleanly too", "[e2e]") {
  DaemonProcess d;
  d.Signal(SIGINT);
  CHECK(d.Wait(15s) == 0);
}

TEST_CASE("SIGHUP reloads the log level and the daemon keeps serving", "[e2e]") {
  DaemonProcess d;
  d.Signal(SIGHUP);
  std::this_thread::sleep_for(300ms);
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  CHECK(client->Call("health", {}, 5s).ok());
  CHECK_THAT(d.Log(), Catch::Contains("SIGHUP"));
}

TEST_CASE("a second daemon on a live socket is refused", "[e2e]") {
  DaemonProcess d;
  ProcessResult second = RunProcess(
      {MedqdPath().string(), "--socket", d.socket(), "--config", (d.dir() / "none.conf").string()});
  CHECK(second.status == 69);
  CHECK_THAT(second.err, Catch::Contains("already serving"));
  // The first one is untouched.
  CHECK(RunMedq(d.socket(), {"health"}).status == 0);
}

TEST_CASE("a stale socket left by a crash is replaced", "[e2e]") {
  TempDir dir;
  const std::string path = (dir.path() / "medq.sock").string();
  {
    // What a crashed daemon leaves: a socket file nobody listens on.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    close(fd);
  }
  REQUIRE(std::filesystem::exists(path));
  // Start on that exact path: DaemonProcess uses its own dir, so run by hand.
  pid_t pid = fork();
  if (pid == 0) {
    const std::string state = (dir.path() / "state").string();
    execl(MedqdPath().c_str(), "medqd", "--socket", path.c_str(), "--config", "/dev/null",
          "--state-dir", state.c_str(), "--log-level", "warn", static_cast<char*>(nullptr));
    _exit(127);
  }
  bool served = false;
  for (int i = 0; i < 500 && !served; ++i) {
    std::this_thread::sleep_for(20ms);
    auto client = ipc::Client::Connect(path);
    served = client.ok() && client->Call("health", {}, 5s).ok();
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(served);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the socket is 0660 in a 0750 directory", "[e2e]") {
  TempDir dir;
  const std::filesystem::path sock_dir = dir.path() / "run";
  DaemonProcess d({"--socket", (sock_dir / "medq.sock").string()});
  struct stat st {};
  REQUIRE(stat((sock_dir / "medq.sock").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  REQUIRE(stat(sock_dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0750);
  CHECK(RunMedq((sock_dir / "medq.sock").string(), {"health"}).status == 0);
}

TEST_CASE("a peer outside the allowed users is refused and logged", "[e2e]") {
  if (getuid() != 0) {
    WARN("skipped: needs root to run a client under another uid");
    return;
  }
  struct passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) {
    WARN("skipped: no user 'nobody' on this machine");
    return;
  }
  DaemonProcess d({"--socket-group", "medq-test-no-such-group"});
  // Let anyone reach the socket file, so the daemon's own check decides.
  chmod(d.dir().c_str(), 0755);
  chmod(d.socket().c_str(), 0666);
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(2);
    auto client = ipc::Client::Connect(d.socket());
    if (!client.ok()) _exit(3);
    auto reply = client->Call("health", {}, std::chrono::seconds(5));
    std::string code = reply.ok() ? reply->value("code", "") : "CLOSED";
    ssize_t n = write(pipefd[1], code.data(), code.size());
    _exit(n > 0 ? 0 : 4);
  }
  close(pipefd[1]);
  char buf[64] = {};
  ssize_t n = read(pipefd[0], buf, sizeof(buf) - 1);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) == "PERMISSION_DENIED");
  CHECK_THAT(d.Log(),
             Catch::Contains("refused connection from uid " + std::to_string(nobody->pw_uid)));
  // Root itself is still welcome.
  CHECK(RunMedq(d.socket(), {"health"}).status == 0);
}

TEST_CASE("medqd --print-config shows the effective configuration", "[e2e]") {
  TempDir dir;
  std::ofstream(dir.path() / "c.conf") << "max_queue = 9\n";
  ProcessResult r = RunProcess({MedqdPath().string(), "--print-config", "--config",
                                (dir.path() / "c.conf").string(), "--max-connections", "17"},
                               {"MEDQ_LOG_LEVEL=debug"});
  CHECK(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("max_queue = 9") && Catch::Contains("max_connections = 17") &&
                        Catch::Contains("log_level = \"debug\""));
}

TEST_CASE("medqd refuses an invalid configuration naming the key", "[e2e]") {
  ProcessResult r =
      RunProcess({MedqdPath().string(), "--config", "/dev/null", "--max-queue", "-3"});
  CHECK(r.status == 64);
  CHECK_THAT(r.err, Catch::Contains("max"));
}

TEST_CASE("medqd refuses a diagnostic switch's invalid value naming the variable", "[e2e]") {
  // Not configuration keys (daemon/engine/tuning.h), but a misspelt value
  // must not run the default without a word.
  for (const char* env : {"MEDQ_ATTENTION_SPLITS=atuo", "MEDQ_CUDA_GRAPHS=off", "MEDQ_GEMV_SPLIT=3",
                          "MEDQ_FUSED_KERNELS=no"}) {
    INFO(env);
    // A socket path too long to serve: were the value taken, medqd would
    // exit 69 at once (and not serve on).
    TempDir dir;
    ProcessResult r =
        RunProcess({MedqdPath().string(), "--config", "/dev/null", "--state-dir",
                    dir.path().string(), "--socket", (dir.path() / std::string(200, 's')).string()},
                   {env});
    CHECK(r.status == 64);
    const std::string name(env, std::string(env).find('='));
    CHECK_THAT(r.err, Catch::Contains(name) && Catch::Contains("is not valid"));
  }
}

}  // namespace medq::test
