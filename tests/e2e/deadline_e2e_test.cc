// Request deadlines (timeout_s, the daemon's request_timeout_s), end to end:
// a running generation stops at its deadline with TIMEOUT after the tokens it
// produced, a waiting one leaves the queue with TIMEOUT (not QUEUE_TIMEOUT),
// and a recorded job is stored timed_out with its partial output.
#include <catch2/catch.hpp>
#include <chrono>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/sanitizers.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A long generation on tiny-llama3 (its 128k-token vocabulary makes each step
// slow): it runs for many seconds unless stopped.
json LongRun(std::optional<double> timeout_s = std::nullopt) {
  json p = {{"model", "tiny-llama3"},
            {"prompt_ids", {128000, 1000, 1001}},
            {"max_tokens", 60000},
            {"temperature", 0}};
  if (timeout_s) p["timeout_s"] = *timeout_s;
  return p;
}

// Loads tiny-llama3 (the load op has no deadline), so that a deadline then
// measures generation, not the load (slow under a sanitizer).
void Warm(const std::string& socket) {
  const json loaded = CallOp(socket, "load", {{"model", "tiny-llama3"}}, 120s);
  INFO(loaded.dump());
  REQUIRE(loaded["event"] == "result");
}

double DeadlineSeconds(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

TEST_CASE("deadline: a running generation stops at timeout_s with TIMEOUT after its tokens",
          "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  Warm(d.socket());
  const auto start = Clock::now();
  const Run run = Generate(d.socket(), LongRun(1.5));
  const double took = DeadlineSeconds(start);
  INFO(run.final().dump());
  REQUIRE(run.final()["event"] == "error");
  CHECK(run.final()["code"] == "TIMEOUT");
  CHECK_THAT(run.final()["message"].get<std::string>(), Catch::Contains("timeout_s of 1.5 s"));
  CHECK(run.Count("token") > 0);  // its partial output reached the client
  CHECK(took >= 1.4);
  CHECK(took < 10 * kSlowdown);  // well before 60000 tokens
  // The slot is free again: the next request runs.
  const Run next = Generate(d.socket(), {{"prompt", "Hello"}, {"mode", "raw"}, {"max_tokens", 3}});
  CHECK(next.final()["event"] == "done");
  // A wrong type names the field.
  json bad = LongRun();
  bad["timeout_s"] = "soon";
  const Run refused = Generate(d.socket(), bad);
  CHECK(refused.final()["code"] == "INVALID_REQUEST");
  CHECK_THAT(refused.final()["message"].get<std::string>(), Catch::Contains("timeout_s"));
  CHECK(refused.final()["param"] == "timeout_s");
}

TEST_CASE("deadline: a job still waiting at its deadline leaves with TIMEOUT", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  RawClient blocker(d.socket());
  SendGenerate(blocker, 1, LongRun());
  AwaitQueue(d.socket(), 1, 0);
  const auto start = Clock::now();
  const Run waited = Generate(
      d.socket(), {{"prompt", "Hello"}, {"mode", "raw"}, {"max_tokens", 3}, {"timeout_s", 1}});
  INFO(waited.final().dump());
  CHECK(waited.final()["event"] == "error");
  CHECK(waited.final()["code"] == "TIMEOUT");
  CHECK(waited.Count("token") == 0);
  CHECK(DeadlineSeconds(start) < 10 * kSlowdown);
  // The running job without a deadline goes on.
  CHECK(CallOp(d.socket(), "queue", json::object())["result"]["running"].size() == 1);
}

TEST_CASE("deadline: request_timeout_s bounds every request, and a recorded job is timed_out",
          "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess d(
      DaemonArgs(repo, {"--state-dir", state.path().string(), "--request-timeout-s", "2"}));
  Warm(d.socket());
  // Longer than the daemon's: capped at it.
  json submitted = CallOp(d.socket(), "submit", {{"op", "generate"}, {"params", LongRun(30)}});
  REQUIRE(submitted["event"] == "result");
  const std::string job = submitted["result"]["job"];
  json result = CallOp(d.socket(), "result", {{"job", job}, {"wait", true}});
  INFO(result.dump());
  REQUIRE(result["event"] == "result");
  CHECK(result["result"]["state"] == "timed_out");
  CHECK(result["result"]["error"]["code"] == "TIMEOUT");
  CHECK(result["result"]["partial"]["completion_tokens"].get<int>() > 0);
  CHECK(!result["result"]["partial"]["text"].get<std::string>().empty());
  json status = CallOp(d.socket(), "status", {{"job", job}});
  CHECK(status["result"]["state"] == "timed_out");
  json health = CallOp(d.socket(), "health", json::object());
  CHECK(health["result"]["store"]["timed_out"] == 1);
  // The CLI's exit status for it is 75, like the other retryable codes.
  const ProcessResult cli = RunMedq(d.socket(), {"generate", "--deadline", "1", "--max-tokens",
                                                 "60000", "--model", "tiny-llama3", "Hello"});
  CHECK(cli.status == 75);
  CHECK_THAT(cli.err, Catch::Contains("TIMEOUT"));
}

TEST_CASE("deadline: over HTTP a request past timeout_s is 504 timeout", "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(DaemonArgs(repo, {"--http-listen", "127.0.0.1:" + std::to_string(port)}));
  const HttpResponse r = HttpCall(port, "POST", "/v1/completions",
                                  json{{"model", "tiny-llama3"},
                                       {"prompt", "Hello"},
                                       {"max_tokens", 60000},
                                       {"temperature", 0},
                                       {"timeout_s", 1}}
                                      .dump());
  INFO(r.body);
  CHECK(r.status == 504);
  CHECK(json::parse(r.body)["error"]["code"] == "timeout");
}

}  // namespace medq::test
