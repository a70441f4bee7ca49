// The circuit breaker, end to end, with the fault injection that makes a
// decode step fail as a broken device would: after breaker_errors device
// errors in a row the model refuses work with NOT_READY and a retry hint,
// health says why, and after the cool-down one probe that succeeds closes it.
#include <catch2/catch.hpp>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

json Short() {
  return {{"prompt", "Hello"}, {"mode", "raw"}, {"max_tokens", 3}, {"temperature", 0}};
}

}  // namespace

TEST_CASE("breaker: device errors in a row pause the model until a probe succeeds", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(
      repo, {"--test-fault-injection", "--breaker-errors", "2", "--breaker-cooldown-s", "2"}));
  for (int i = 0; i < 2; ++i) {
    REQUIRE(CallOp(d.socket(), "inject-fault", {{"at", "decode-error"}})["event"] == "result");
    const Run failed = Generate(d.socket(), Short());
    INFO(failed.final().dump());
    REQUIRE(failed.final()["code"] == "INTERNAL");
    CHECK_THAT(failed.final()["message"].get<std::string>(),
               Catch::Contains("illegal memory access"));
  }
  const Run refused = Generate(d.socket(), Short());
  INFO(refused.final().dump());
  REQUIRE(refused.final()["code"] == "NOT_READY");
  CHECK(refused.final()["retry_after_s"].get<double>() >= 1);
  CHECK_THAT(refused.final()["message"].get<std::string>(), Catch::Contains("circuit breaker"));

  json health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["status"] == "degraded");
  REQUIRE(health["breakers"].size() == 1);
  CHECK(health["breakers"][0]["state"] == "open");
  CHECK(health["breakers"][0]["consecutive_errors"] == 2);
  // Other ops on the daemon go on: tokenize is no device work.
  CHECK(CallOp(d.socket(), "tokenize", {{"text", "hi"}})["event"] == "result");

  std::this_thread::sleep_for(2200ms);
  health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["breakers"][0]["state"] == "half_open");
  const Run probe = Generate(d.socket(), Short());
  CHECK(probe.final()["event"] == "done");
  health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["status"] == "ok");
  CHECK(health["breakers"].empty());
  CHECK(Generate(d.socket(), Short()).final()["event"] == "done");
}

}  // namespace medq::test
