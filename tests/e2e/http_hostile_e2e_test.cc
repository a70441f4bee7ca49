// Hostile HTTP clients end to end (issue 46): a real daemon with
// --http-listen, sent the probe's reproducers as given. Each case checks the
// answer the contract (docs/http.md) names and that the daemon still serves
// afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// The endpoint serves a new client. Connections the daemon closed after an
// answer linger up to 2 s, reading what their clients still send, and count
// toward max_connections meanwhile: a few tries cover that.
void RequireHealthy(int port) {
  int status = 0;
  for (int i = 0; i < 50 && status != 200; ++i) {
    status = HttpCall(port, "GET", "/health").status;
    if (status != 200) std::this_thread::sleep_for(100ms);
  }
  CHECK(status == 200);
}

// The daemon's arguments with its HTTP endpoint requiring the key
// "secret-one" (a keys file written into the repo's folder).
std::vector<std::string> KeyedArgs(const ModelRepo& repo, int port) {
  const fs::path keys = repo.dir() / "keys";
  std::ofstream(keys) << "secret-one\n";
  return HttpArgs(repo, port, {"--http-api-keys-file", keys.string()});
}

// n opening brackets, then n closing ones: an array nested n levels deep.
std::string Brackets(int n) {
  return std::string(static_cast<size_t>(n), '[') + std::string(static_cast<size_t>(n), ']');
}

// A recorded job's result, waiting for it.
json AwaitResult(const std::string& socket, const std::string& job) {
  const json reply = CallOp(socket, "result", {{"job", job}, {"wait", true}}, 120s);
  INFO(reply.dump());
  REQUIRE(reply["event"] == "result");
  return reply["result"];
}

// A field of /proc/PID/status, in KiB (VmRSS, VmHWM).
long ProcStatusKib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  FAIL("no " << field << " in /proc/" << pid << "/status");
  return 0;
}

}  // namespace

TEST_CASE("http hostile: deep JSON bodies are 400 naming the nesting limit, no crash",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const auto require_too_deep = [&](const std::string& path, const std::string& body) {
    const HttpResponse r = HttpCall(port, "POST", path, body);
    RequireError(r, 400);
    const json e = Body(r)["error"];
    CHECK(e["type"] == "invalid_request_error");
    CHECK(e["message"].get<std::string>().find("64") != std::string::npos);
    CHECK(e["message"].get<std::string>().find("deeper") != std::string::npos);
  };
  // The reproducer: 100,000 levels of `tools`.
  const int n = 100000;
  require_too_deep("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"hi"}],"tools":)" + Brackets(n) + "}");
  // A deep value inside a message, and in the other POST routes' bodies.
  require_too_deep("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":"hi","name":)" + Brackets(n) + "}]}");
  require_too_deep("/v1/chat/completions",
                   R"({"messages":[{"role":"user","content":)" + Brackets(n) + "}]}");
  require_too_deep("/v1/completions", R"({"prompt":"hi","stop":)" + Brackets(n) + "}");
  require_too_deep("/v1/embeddings", R"({"input":)" + Brackets(n) + "}");
  // Just past the limit (the body's object is level 1: 64 more arrays).
  require_too_deep("/v1/completions", R"({"prompt":"hi","max_tokens":2,"x":)" + Brackets(64) + "}");
  // At the limit: parsed, then answered (400 naming the field medq does not
  // read), and the daemon goes on.
  RequireError(HttpCall(port, "POST", "/v1/completions",
                        R"({"prompt":"hi","max_tokens":2,"x":)" + Brackets(63) + "}"),
               400, "x");
  RequireHealthy(port);
  CHECK(d.Wait(0ms) == -1);  // still running
}

TEST_CASE("http hostile: a request line that is not UTF-8 is answered, and times out after",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--max-connections", "4", "--idle-timeout-s", "1"}));
  // The reproducer, four times with max_connections 4: every client gets its
  // answer (404, its JSON body valid with the bad byte replaced), and none
  // holds its connection past the idle timeout.
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<HttpClient>(port));
    clients.back()->Send("GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  for (auto& c : clients) {
    auto r = c->Read(10s);
    REQUIRE(r.has_value());
    RequireError(*r, 404);
    CHECK(Body(*r)["error"]["message"].get<std::string>().find("\xef\xbf\xbd") !=
          std::string::npos);
  }
  for (auto& c : clients)
    CHECK(c->ClosedWithin(5s));
  // Another client is served.
  RequireHealthy(port);
  // The same bytes in a header value and in a method's path on a known route.
  {
    HttpClient c(port);
    c.Send("GET /v1/models\xff\xfe HTTP/1.1\r\nHost: \xff\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    RequireError(*r, 404);
  }
  {
    HttpClient c(port);
    c.Send("DELETE /health?\xc3\x28 HTTP/1.1\r\nHost: x\r\nconnection: close\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    RequireError(*r, 405);
    CHECK(c.ClosedWithin(5s));
  }
  RequireHealthy(port);
}

TEST_CASE("http hostile: without an API key the body is not read: 401 after the headers",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(KeyedArgs(repo, port));
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
      "content-length: 16777215\r\n";
  // The headers alone: 401 comes before any byte of the body is sent, and the
  // connection closes.
  for (const std::string auth : {"", "authorization: Bearer wrong\r\n"}) {
    HttpClient c(port);
    c.Send(head + auth + "\r\n");
    auto r = c.Read(5s);
    REQUIRE(r.has_value());
    RequireError(*r, 401);
    CHECK(r->headers["www-authenticate"] == "Bearer");
    CHECK(c.ClosedWithin(5s));
  }
  // A chunked body too.
  {
    HttpClient c(port);
    c.Send("POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n");
    auto r = c.Read(5s);
    REQUIRE(r.has_value());
    RequireError(*r, 401);
    CHECK(c.ClosedWithin(5s));
  }
  // The reproducer, 24 clients at once, each sending its 16 MiB - 1 body: the
  // daemon's peak RSS grows by far less than one body each (the probe saw
  // +387 MiB).
  const long hwm_before = ProcStatusKib(d.pid(), "VmHWM");
  std::atomic<int> answered{0};
  std::vector<std::thread> uploads;
  for (int i = 0; i < 24; ++i) {
    uploads.emplace_back([&] {
      HttpClient c(port);
      c.Send(head + "\r\n");
      c.Send(std::string(16777215, 'a'));  // stops when the daemon closes
      auto r = c.Read(10s);
      if (r && r->status == 401) ++answered;
    });
  }
  for (auto& t : uploads)
    t.join();
  const long grown_kib = ProcStatusKib(d.pid(), "VmHWM") - hwm_before;
  INFO("peak RSS grew by " << grown_kib << " KiB");
  CHECK(grown_kib < 48 * 1024);
  CHECK(answered == 24);
  // With the key the same route reads its body; /health needs none.
  CHECK(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"Hello","max_tokens":2})",
                 "authorization: Bearer secret-one\r\n")
            .status == 200);
  RequireHealthy(port);
}

TEST_CASE("http hostile: a streaming client that hangs up leaves its job cancelled",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const json long_run = {{"prompt", "Hello"}, {"max_tokens", 2000}, {"stream", true}};
  // Over HTTP: the head (with the job's id) and a token, then the client goes.
  std::string http_job;
  {
    HttpClient c(port);
    const std::string body = long_run.dump();
    c.Send("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    auto head = c.Read(30s, /*head=*/true);
    REQUIRE(head.has_value());
    REQUIRE(head->status == 200);
    http_job = head->headers["x-medq-job"];
    REQUIRE(!http_job.empty());
  }
  // On the socket, the same: its events up to the first token, then gone.
  std::string socket_job;
  {
    RawClient c(d.socket());
    SendGenerate(c, 1, {{"prompt", "Hello"}, {"max_tokens", 2000}, {"mode", "raw"}});
    for (;;) {
      auto event = c.Read(30s);
      REQUIRE(event.has_value());
      if ((*event)["event"] == "started") socket_job = (*event)["job"];
      if ((*event)["event"] == "token") break;
    }
    REQUIRE(!socket_job.empty());
  }
  // Both are recorded cancelled (protocol.md: a streaming client going away),
  // with the CANCELLED error.
  for (const std::string& job : {socket_job, http_job}) {
    INFO(job);
    const json result = AwaitResult(d.socket(), job);
    INFO(result.dump());
    CHECK(result["state"] == "cancelled");
    CHECK(result["error"]["code"] == "CANCELLED");
    const json status = CallOp(d.socket(), "status", {{"job", job}});
    CHECK(status["result"]["state"] == "cancelled");
  }
  RequireHealthy(port);
}

TEST_CASE("http hostile: oversized heads are 431, logprobs must be an integer, Bearer is loose",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(KeyedArgs(repo, port));
  // A 1 MiB header and a 100 KiB request line: 431, then close.
  {
    HttpClient c(port);
    c.Send("GET /health HTTP/1.1\r\nhost: x\r\nx-big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    RequireError(*r, 431);
    CHECK(c.ClosedWithin(5s));
  }
  {
    HttpClient c(port);
    c.Send("GET /" + std::string(100 * 1024, 'a') + " HTTP/1.1\r\nhost: x\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    RequireError(*r, 431);
    CHECK(c.ClosedWithin(5s));
  }
  RequireHealthy(port);

  // The Bearer scheme in any case, whitespace around the key ignored.
  for (const std::string auth : {"Bearer secret-one", "bearer secret-one", "BEARER secret-one",
                                 "Bearer secret-one ", "Bearer  secret-one\t"}) {
    INFO("authorization: " << auth);
    CHECK(HttpCall(port, "GET", "/v1/models", "", "authorization: " + auth + "\r\n").status == 200);
  }
  for (const std::string auth : {"Bearer secret-on", "Basic secret-one", "Bearersecret-one",
                                 "Bearer secret-one x", "secret-one"}) {
    INFO("authorization: " << auth);
    RequireError(HttpCall(port, "GET", "/v1/models", "", "authorization: " + auth + "\r\n"), 401);
  }

  // /v1/completions: logprobs is an integer (or null); anything else is 400
  // naming it.
  const std::string key = "authorization: Bearer secret-one\r\n";
  for (const std::string value : {R"("x")", "[]", "{}", "true", "false", "1.5"}) {
    INFO("logprobs " << value);
    RequireError(HttpCall(port, "POST", "/v1/completions",
                          R"({"prompt":"Hello","max_tokens":2,"logprobs":)" + value + "}", key),
                 400, "logprobs");
  }
  RequireError(HttpCall(port, "POST", "/v1/completions",
                        R"({"prompt":"Hello","max_tokens":2,"logprobs":21})", key),
               400, "logprobs");
  for (const std::string value : {"0", "2", "null"}) {
    INFO("logprobs " << value);
    CHECK(HttpCall(port, "POST", "/v1/completions",
                   R"({"prompt":"Hello","max_tokens":2,"logprobs":)" + value + "}", key)
              .status == 200);
  }
}

}  // namespace medq::test
