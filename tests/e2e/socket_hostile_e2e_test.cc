// Hostile socket clients and a hostile models directory, each reproduced
// against a real daemon (issue 46): another user's job cancelled through
// `cancel`, clients that send thousands of requests and never read, a line
// with a NUL byte, an error echoing a 15 MiB model name, and a FIFO where a
// model file belongs.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/sanitizers.h"
#include "tests/support/skip.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A generation long enough to hold the generate slot (tiny-llama3's 128k
// vocabulary makes each step slow).
json SlotHolder() {
  return {{"model", "tiny-llama3"},
          {"prompt_ids", {128000, 1000, 1001}},
          {"max_tokens", 4000},
          {"temperature", 0}};
}

// Runs `fn` in a child process as `uid`/`gid` and returns what it returned
// (its replies, dumped). Root only.
std::string RunAsUser(uid_t uid, gid_t gid, const std::function<std::string()>& fn) {
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(pipefd[0]);
    if (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(2);
    const std::string out = fn();
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(pipefd[1], out.data() + done, out.size() - done);
      if (n <= 0) _exit(4);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(pipefd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(pipefd[0], buf, sizeof(buf))) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return out;
}

// One op's reply, as another user; "CLOSED" when the daemon refused.
std::function<std::string()> UserCall(const std::string& socket, const std::string& op,
                                      json params) {
  return [socket, op, params] {
    auto client = ipc::Client::Connect(socket);
    if (!client.ok()) return std::string("CONNECT FAILED");
    auto reply = client->Call(op, params, std::chrono::seconds(30));
    return reply.ok() ? reply->dump() : std::string("CLOSED");
  };
}

// A socket client that never reads: it sends what the socket takes without
// blocking, and closes only when the test ends.
class NeverReader {
 public:
  explicit NeverReader(const std::string& socket) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~NeverReader() { close(fd_); }
  NeverReader(const NeverReader&) = delete;
  NeverReader& operator=(const NeverReader&) = delete;

  // Queues `line` `count` times; sends what the socket takes now.
  void Queue(const std::string& line, int count) {
    for (int i = 0; i < count; ++i)
      out_ += line;
    Pump();
  }
  void Pump() {
    while (!out_.empty()) {
      const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) return;
      out_.erase(0, static_cast<size_t>(n));
    }
  }
  // The daemon closed the connection (both directions shut: POLLHUP).
  bool Closed() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
  }
  size_t unsent() const { return out_.size(); }

 private:
  int fd_ = -1;
  std::string out_;
};

int64_t SockRss(const std::string& socket) {
  return CallOp(socket, "health")["result"]["memory"]["rss_bytes"].get<int64_t>();
}

}  // namespace

TEST_CASE("a socket_group member cannot cancel another user's job", "[e2e]") {
  if (getuid() != 0) {
    MEDQ_SKIP("needs root to run clients under two other uids");
  }
  struct passwd* nobody = getpwnam("nobody");
  struct group* nogroup = getgrnam("nogroup");
  if (nobody == nullptr || nogroup == nullptr) {
    MEDQ_SKIP("no user 'nobody' or group 'nogroup' on this machine");
  }
  // Alice and Mallory are two users of the socket group (their primary
  // group is the daemon's socket_group); the daemon runs as root.
  const uid_t alice = nobody->pw_uid;
  const uid_t mallory = 1;  // "daemon" on Debian; any uid other than alice's
  const gid_t group = nogroup->gr_gid;
  ModelRepo repo;
  SECTION("a recorded job (the job store)") {
    DaemonProcess d(DaemonArgs(repo, {"--socket-group", nogroup->gr_name}));
    chmod(d.dir().c_str(), 0755);
    chmod(d.socket().c_str(), 0666);
    auto submit = [&] {
      const json r = json::parse(RunAsUser(
          alice, group,
          UserCall(d.socket(), "submit", {{"op", "generate"}, {"params", SlotHolder()}})));
      INFO(r.dump());
      REQUIRE(r["event"] == "result");
      return r["result"]["job"].get<std::string>();
    };
    const std::string running = submit();
    const std::string waiting = submit();
    AwaitQueue(d.socket(), 1, 1);

    // Mallory sees them in `queue`, but for her they do not exist.
    const json unknown =
        json::parse(RunAsUser(mallory, group, UserCall(d.socket(), "cancel", {{"job", "j999"}})));
    REQUIRE(unknown["code"] == "INVALID_REQUEST");
    for (const std::string& job : {running, waiting}) {
      const json r =
          json::parse(RunAsUser(mallory, group, UserCall(d.socket(), "cancel", {{"job", job}})));
      INFO(r.dump());
      CHECK(r["event"] == "error");
      CHECK(r["code"] == "INVALID_REQUEST");
      CHECK_THAT(r["message"].get<std::string>(), Catch::Contains("no waiting or running"));
      const json status =
          json::parse(RunAsUser(mallory, group, UserCall(d.socket(), "status", {{"job", job}})));
      CHECK(status["code"] == "INVALID_REQUEST");
    }
    // Nothing was cancelled.
    const json q = CallOp(d.socket(), "queue")["result"];
    CHECK(q["running"].size() == 1);
    CHECK(q["waiting"].size() == 1);
    CHECK(q["totals"]["cancelled"] == 0);
    // (Running once the worker admits it: its model may still be loading.)
    std::string state;
    for (int i = 0; i < 300 && state != "running"; ++i) {
      state = CallOp(d.socket(), "status", {{"job", running}})["result"]["state"];
      if (state != "running") std::this_thread::sleep_for(20ms);
    }
    CHECK(state == "running");

    // Alice may cancel her own; root (an operator) anyone's.
    const json own =
        json::parse(RunAsUser(alice, group, UserCall(d.socket(), "cancel", {{"job", waiting}})));
    INFO(own.dump());
    CHECK(own["result"]["state"] == "cancelled");
    const json by_root = CallOp(d.socket(), "cancel", {{"job", running}});
    CHECK(by_root["event"] == "result");
  }
  SECTION("a streaming job without a job store") {
    DaemonProcess d(DaemonArgs(repo, {"--socket-group", nogroup->gr_name, "--state-dir", "none"}));
    chmod(d.dir().c_str(), 0755);
    chmod(d.socket().c_str(), 0666);
    // The owner streams as root here: Mallory's cancel must not reach it either.
    RawClient owner(d.socket());
    SendGenerate(owner, 1, SlotHolder());
    json started;
    for (;;) {
      auto e = owner.Read(60s);
      REQUIRE(e.has_value());
      if ((*e)["event"] == "started") {
        started = *e;
        break;
      }
    }
    const std::string job = started["job"];
    const json r =
        json::parse(RunAsUser(mallory, group, UserCall(d.socket(), "cancel", {{"job", job}})));
    INFO(r.dump());
    CHECK(r["code"] == "INVALID_REQUEST");
    CHECK(CallOp(d.socket(), "queue")["result"]["running"].size() == 1);
    // Its owner can.
    owner.Send(json{{"v", 1}, {"id", 2}, {"op", "cancel"}, {"params", {{"job", job}}}}.dump() +
               "\n");
    bool cancelled = false;
    for (int i = 0; i < 10000 && !cancelled; ++i) {
      auto e = owner.Read(60s);
      REQUIRE(e.has_value());
      cancelled = (*e)["id"] == 1 && (*e)["event"] == "done";
      if (cancelled) CHECK((*e)["finish_reason"] == "cancelled");
    }
    CHECK(cancelled);
  }
}

TEST_CASE("clients that send thousands of requests and never read are bounded and closed",
          "[e2e]") {
  DaemonProcess d({"--idle-timeout-s", "2"});
  const int64_t rss_before = SockRss(d.socket());
  const std::string metrics = R"({"v":1,"id":1,"op":"metrics"})"
                              "\n";
  std::vector<std::unique_ptr<NeverReader>> hoarders;
  const auto start = Clock::now();
  for (int i = 0; i < 16; ++i) {
    hoarders.push_back(std::make_unique<NeverReader>(d.socket()));
    hoarders.back()->Queue(metrics, 3000);
  }
  // Everyone else is still served, at once, while they hoard.
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    // The loop renders the hoarders' replies until each has 4 MiB unread
    // (some 500 metrics each): 2 s at most here, far longer sanitized.
    const json h = CallOp(d.socket(), "health", json::object(), 30s * kSlowdown);
    CHECK(h["event"] == "result");
    CHECK(Clock::now() - t0 < (kSanitized ? 30s : 2s));
    for (auto& h2 : hoarders)
      h2->Pump();
    std::this_thread::sleep_for(100ms);
  }
  const int64_t rss_peak = SockRss(d.socket());
  // Closed for reading nothing within the idle timeout (2 s), with slack.
  bool all_closed = false;
  while (!all_closed && Clock::now() - start < 15s * kSlowdown) {
    all_closed = true;
    for (auto& h : hoarders)
      all_closed = all_closed && h->Closed();
    std::this_thread::sleep_for(100ms);
  }
  const auto took = Clock::now() - start;
  INFO(d.Log());
  CHECK(all_closed);
  CHECK(took < 8s * kSlowdown);
  CHECK_THAT(d.Log(), Catch::Contains("read none of its replies"));
  // Each held at most a few MiB (it was 93 MiB each): 16 of them well under
  // 200 MiB together, and the memory is given back once they are gone.
  // (Not under a sanitizer, whose allocator keeps what is freed.)
  INFO("RSS before " << rss_before << ", while hoarding " << rss_peak);
  if (!kSanitized) CHECK(rss_peak - rss_before < (200 << 20));
  hoarders.clear();
  std::this_thread::sleep_for(1500ms);  // a tick trims the heap
  const int64_t rss_after = SockRss(d.socket());
  INFO("RSS after " << rss_after);
  if (!kSanitized) CHECK(rss_after - rss_before < (64 << 20));
  CHECK(CallOp(d.socket(), "health")["result"]["connections"] == 1);
  RequireHealthy(d.socket());
}

TEST_CASE("a client that reads slowly but steadily is not closed", "[e2e]") {
  DaemonProcess d({"--idle-timeout-s", "2"});
  RawClient c(d.socket());
  std::string lines;
  for (int i = 0; i < 400; ++i)
    lines += R"({"v":1,"id":)" + std::to_string(i) + R"(,"op":"metrics"})" + "\n";
  REQUIRE(c.Send(lines));
  int replies = 0;
  const auto start = Clock::now();
  while (replies < 400) {
    std::this_thread::sleep_for(10ms);  // over 4 s in all: longer than the timeout
    std::optional<json> r = c.Read(10s * kSlowdown);
    REQUIRE(r.has_value());
    const std::string event = r->value("event", "");
    CHECK(event == "result");
    ++replies;
  }
  CHECK(Clock::now() - start > 3s);
}

TEST_CASE("a socket line with a NUL byte is refused, and huge values are not echoed back",
          "[e2e]") {
  DaemonProcess d;
  RawClient c(d.socket());
  const std::string nul_line =
      std::string(R"({"v":1,"id":1,"op":"health"})") + '\0' + R"(,"op":"cleanup-memory"})" + "\n";
  const json refused = c.Roundtrip(nul_line);
  CHECK(refused["event"] == "error");
  CHECK(refused["code"] == "INVALID_REQUEST");
  CHECK_THAT(refused["message"].get<std::string>(), Catch::Contains("NUL byte"));

  // A 15 MiB model name (under max_message_bytes): the error quotes 200
  // bytes of it and its length, not 15 MiB.
  const std::string name(15u << 20, 'm');
  for (const char* op : {"tokenize", "generate", "load"}) {
    json params = {{"model", name}};
    if (std::string(op) == "tokenize") params["text"] = "hi";
    if (std::string(op) == "generate") params["prompt"] = "hi";
    REQUIRE(c.Send(json{{"v", 1}, {"id", op}, {"op", op}, {"params", params}}.dump() + "\n"));
    const std::optional<json> read = c.Read(10s * kSlowdown);  // 15 MiB to parse
    REQUIRE(read.has_value());
    const json& reply = *read;
    INFO(op);
    CHECK(reply["event"] == "error");
    CHECK(reply["code"] == "MODEL_NOT_FOUND");
    CHECK(reply.dump().size() < 4096);
    CHECK_THAT(reply["message"].get<std::string>(), Catch::Contains("(15728640 bytes)"));
  }
  REQUIRE(c.Send(json{{"v", 1}, {"id", 2}, {"op", std::string(15u << 20, 'o')}}.dump() + "\n"));
  const std::optional<json> unknown_op = c.Read(10s * kSlowdown);
  REQUIRE(unknown_op.has_value());
  CHECK((*unknown_op)["code"] == "UNKNOWN_OP");
  CHECK(unknown_op->dump().size() < 4096);
  RequireHealthy(d.socket());
}

TEST_CASE("a FIFO named like a model file is refused at once, and SIGTERM still stops medqd",
          "[e2e]") {
  ModelRepo repo;
  // Inside the models directory, and (allow_model_paths) outside it.
  TempDir outside;
  const std::filesystem::path in_dir = repo.dir() / "fifo-model";
  const std::filesystem::path out_dir = outside.path() / "fifo-model";
  for (const auto& dir : {in_dir, out_dir}) {
    std::filesystem::create_directories(dir);
    REQUIRE(mkfifo((dir / "config.json").c_str(), 0644) == 0);
    REQUIRE(mkfifo((dir / "tokenizer.json").c_str(), 0644) == 0);
  }
  DaemonProcess d(DaemonArgs(repo, {"--allow-model-paths", "true"}));
  // Twice libuv's four pool threads, in two waves of four (within the
  // model queue): each such request once held one thread forever.
  std::vector<json> replies(8);
  const auto start = Clock::now();
  for (size_t wave = 0; wave < 2; ++wave) {
    std::vector<std::thread> clients;
    for (size_t i = wave * 4; i < wave * 4 + 4; ++i) {
      clients.emplace_back([&, i] {
        const std::string model = i % 2 == 0 ? "fifo-model" : out_dir.string();
        auto client = ipc::Client::Connect(d.socket());
        if (!client.ok()) return;
        auto reply = client->Call("tokenize", {{"model", model}, {"text", "hi"}}, 20s);
        if (reply.ok()) replies[i] = *reply;
      });
    }
    for (std::thread& t : clients)
      t.join();
  }
  CHECK(Clock::now() - start < 10s);
  for (const json& r : replies) {
    INFO(r.dump());
    CHECK(r.value("event", "") == "error");
    CHECK(r.value("code", "") == "INVALID_REQUEST");
    const std::string message = r.value("message", "");
    CHECK_THAT(message, Catch::Contains("fifo-model/config.json"));
    CHECK_THAT(message, Catch::Contains("not a regular file"));
    // Named relative to the model, never by the daemon's absolute path.
    CHECK(message.find(repo.dir().string()) == std::string::npos);
    CHECK(message.find(outside.path().string()) == std::string::npos);
  }
  // Everything else still works.
  CHECK(CallOp(d.socket(), "models")["event"] == "result");
  const Run run = Generate(d.socket(), {{"prompt", "Hello"}, {"max_tokens", 4}});
  CHECK(run.final()["event"] == "done");
  d.Signal(SIGTERM);
  CHECK(d.Wait(20s) == 0);
}

}  // namespace medq::test
