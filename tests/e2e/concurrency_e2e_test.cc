// Several generations at once (max_concurrent), the per-class queues and the
// per-sequence memory admission, end to end on a real daemon with the fixture
// models.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <regex>
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

// A seeded, sampled run of tiny-llama3: its tokens depend on the seed, the
// prompt and nothing else, so it can be compared with itself run alone.
// (No top_p: sorting its 128k-token vocabulary each step would dominate.)
json SampledParams(int i, int max_tokens) {
  std::vector<int32_t> prompt = {128000};
  for (int k = 0; k < 3 + 4 * i; ++k)
    prompt.push_back(1000 + 37 * k + i);
  return {{"model", "tiny-llama3"}, {"prompt_ids", prompt}, {"max_tokens", max_tokens},
          {"temperature", 0.9},     {"seed", 1234 + i},     {"return_ids", true}};
}

// Reads `c`'s events for `id` until its first token; returns the job id its
// `started` event named.
std::string AwaitFirstToken(RawClient& c, const json& id) {
  std::string job;
  for (;;) {
    auto e = c.Read(30s);
    REQUIRE(e.has_value());
    REQUIRE((*e)["event"] != "error");
    if ((*e)["id"] != id) continue;
    if ((*e)["event"] == "started") job = (*e)["job"];
    if ((*e)["event"] == "token") return job;
  }
}

// True when `c` receives a token event for `id` within `wait`.
bool TokenWithin(RawClient& c, const json& id, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < until) {
    auto e = c.Read(50ms);
    if (e && (*e)["id"] == id && (*e)["event"] == "token") return true;
  }
  return false;
}

}  // namespace

TEST_CASE("max_concurrent 2: two run at once, three wait in order, each equals its solo run",
          "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-concurrent", "2", "--max-queue", "5"}));
  constexpr int kClients = 5;
  // One after another, each answered (started or queued) before the next is
  // sent: the daemon reads five sockets in no promised order.
  std::vector<std::unique_ptr<RawClient>> clients;
  std::vector<json> first_events;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(d.socket()));
    SendGenerate(*clients.back(), i, SampledParams(i, 400));
    auto first = clients.back()->Read(10s);
    REQUIRE(first.has_value());
    first_events.push_back(*first);
  }
  AwaitQueue(d.socket(), 2, 3);
  auto health = ipc::Client::Connect(d.socket())->Call("health", {}, 5s);
  REQUIRE(health.ok());
  CHECK((*health)["result"]["limits"]["max_concurrent"] == 2);

  std::vector<Run> together;
  for (int i = 0; i < kClients; ++i) {
    together.push_back(Collect(*clients[i], i));
    together.back().events.insert(together.back().events.begin(), first_events[i]);
  }
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i);
    REQUIRE(together[i].final()["event"] == "done");
    CHECK(together[i].Count("started") == 1);
    // The first two start at once; the other three are told their place.
    if (i < 2) {
      CHECK(together[i].Count("queued") == 0);
    } else {
      const json& first_queued = together[i].events.front();
      REQUIRE(first_queued["event"] == "queued");
      CHECK(first_queued["position"] == i - 1);
    }
  }
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i);
    const Run solo = Generate(d.socket(), SampledParams(i, 400));
    REQUIRE(solo.final()["event"] == "done");
    CHECK(solo.Ids() == together[i].Ids());
    CHECK(solo.Text() == together[i].Text());
    CHECK(solo.final()["finish_reason"] == together[i].final()["finish_reason"]);
  }
}

// The bytes `models` reports for the loaded tiny-llama3.
static int64_t LoadedBytes(const std::string& socket) {
  auto models = ipc::Client::Connect(socket)->Call("models", {}, 10s);
  REQUIRE(models.ok());
  for (const json& m : (*models)["result"]["loaded"]) {
    if (m["name"] == "tiny-llama3") return m["parameter_bytes"].get<int64_t>();
  }
  FAIL("tiny-llama3 is not loaded");
  return 0;
}

TEST_CASE("max_concurrent 2 with bf16 weights on the CPU: a packed copy, runs equal solo runs",
          "[e2e][concurrency]") {
  ModelRepo repo;
  int64_t row_major_bytes = 0;
  {
    DaemonProcess one(DaemonArgs(repo, {"--device", "cpu", "--dtype", "bf16"}));
    REQUIRE(Generate(one.socket(), SampledParams(0, 4)).final()["event"] == "done");
    row_major_bytes = LoadedBytes(one.socket());
  }
  DaemonProcess d(
      DaemonArgs(repo, {"--device", "cpu", "--dtype", "bf16", "--max-concurrent", "2"}));
  constexpr int kClients = 3;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(d.socket()));
    SendGenerate(*clients.back(), i, SampledParams(i, 120));
  }
  std::vector<Run> together;
  for (int i = 0; i < kClients; ++i)
    together.push_back(Collect(*clients[i], i));
  // The packed copy of the projections is held and counted.
  CHECK(LoadedBytes(d.socket()) > row_major_bytes);
  for (int i = 0; i < kClients; ++i) {
    INFO("client " << i);
    REQUIRE(together[i].final()["event"] == "done");
    const Run solo = Generate(d.socket(), SampledParams(i, 120));
    REQUIRE(solo.final()["event"] == "done");
    CHECK(solo.Ids() == together[i].Ids());
  }
}

TEST_CASE("a generation that finds none running waits for another, until the batch is full",
          "[e2e][concurrency]") {
  ModelRepo repo;
  // A wait far longer than the test's own pauses.
  DaemonProcess d(DaemonArgs(repo, {"--max-concurrent", "2", "--batch-wait-ms", "10000"}));
  RawClient a(d.socket()), b(d.socket());
  const auto t0 = std::chrono::steady_clock::now();
  SendGenerate(a, "a", SampledParams(0, 8));
  // No generation runs: the first waits for another to start with it...
  CHECK_FALSE(TokenWithin(a, "a", 700ms));
  SendGenerate(b, "b", SampledParams(1, 8));
  // ...and the second fills the batch (max_concurrent 2), so both start now,
  // before the wait would have ended: that alone takes 10 s from t0, so any
  // first token sooner proves it, however slow the build (ASan) or machine.
  AwaitFirstToken(a, "a");
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
  CHECK(Collect(a, "a").final()["event"] == "done");
  CHECK(Collect(b, "b").final()["event"] == "done");
}

TEST_CASE("each generation that comes during the wait begins it anew", "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-concurrent", "3", "--batch-wait-ms", "1500"}));
  RawClient a(d.socket()), b(d.socket());
  SendGenerate(a, "a", SampledParams(0, 8));
  CHECK_FALSE(TokenWithin(a, "a", 1000ms));
  // The second comes 1 s into the wait, which now lasts until 1.5 s after
  // it: without the new start the first would run from 1.5 s on.
  SendGenerate(b, "b", SampledParams(1, 8));
  CHECK_FALSE(TokenWithin(a, "a", 1000ms));
  // No third comes (max_concurrent 3): both start when the wait ends.
  AwaitFirstToken(a, "a");
  CHECK(Collect(a, "a").final()["event"] == "done");
  CHECK(Collect(b, "b").final()["event"] == "done");
}

TEST_CASE("with max_concurrent 1 a generation never waits for others to start with it",
          "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--batch-wait-ms", "10000"}));
  RawClient a(d.socket());
  const auto t0 = std::chrono::steady_clock::now();
  SendGenerate(a, "a", SampledParams(0, 4));
  CHECK(Collect(a, "a").final()["event"] == "done");
  // Waiting would take 10 s from t0 before the first token.
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("cancelling one sequence mid-batch leaves the others unchanged", "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-concurrent", "3"}));
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<RawClient>(d.socket()));
    SendGenerate(*clients.back(), i, SampledParams(i, i == 1 ? 100000 : 600));
  }
  const std::string job_1 = AwaitFirstToken(*clients[1], 1);
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto q = client->Call("queue", {}, 5s);
  REQUIRE(q.ok());
  REQUIRE((*q)["result"]["running"].size() == 3);
  for (const json& j : (*q)["result"]["running"])
    CHECK(j["job_class"] == "generate");
  auto cancel = client->Call("cancel", {{"job", job_1}}, 5s);
  REQUIRE(cancel.ok());
  CHECK((*cancel)["result"]["state"] == "cancelling");
  const Run cancelled = Collect(*clients[1], 1);
  CHECK(cancelled.final()["finish_reason"] == "cancelled");
  for (int i : {0, 2}) {
    INFO("client " << i);
    const Run together = Collect(*clients[i], i);
    REQUIRE(together.final()["event"] == "done");
    const Run solo = Generate(d.socket(), SampledParams(i, 600));
    CHECK(solo.Ids() == together.Ids());
  }
}

TEST_CASE("a client killed mid-stream frees its slot for the next job", "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));  // max_concurrent 1: the generation lock
  auto first = std::make_unique<RawClient>(d.socket());
  SendGenerate(*first, "first", SampledParams(0, 100000));
  AwaitFirstToken(*first, "first");
  RawClient second(d.socket());
  SendGenerate(second, "second", SampledParams(1, 8));
  auto queued = second.Read(10s);
  REQUIRE(queued.has_value());
  CHECK((*queued)["event"] == "queued");
  CHECK((*queued)["position"] == 1);
  first.reset();  // the client goes away without a word
  const Run run = Collect(second, "second", 10s);
  CHECK(run.final()["event"] == "done");
  CHECK(run.final()["usage"]["completion_tokens"].get<int>() >= 1);
}

TEST_CASE("per class: model jobs run beside a long generation, a second generation waits",
          "[e2e][concurrency]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-loaded-models", "2"}));
  RawClient runner(d.socket());
  SendGenerate(runner, "run", SampledParams(0, 100000));
  AwaitFirstToken(runner, "run");
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  // Each of these is a job of the model class: none waits for the generation.
  const auto t0 = std::chrono::steady_clock::now();
  auto tokens = client->Call("tokenize", {{"model", "tiny-llama3"}, {"text", "Hello there"}}, 10s);
  REQUIRE(tokens.ok());
  CHECK_FALSE((*tokens)["result"]["ids"].empty());
  auto load = client->Call("load", {{"model", "tiny-qwen2"}}, 30s);
  REQUIRE(load.ok());
  CHECK((*load)["result"]["model"] == "tiny-qwen2");
  auto text = client->Call("detokenize", {{"model", "tiny-qwen2"}, {"ids", {9707}}}, 10s);
  REQUIRE(text.ok());
  CHECK(std::chrono::steady_clock::now() - t0 < 20s);

  // A second generation waits for the generation slot.
  RawClient waiter(d.socket());
  SendGenerate(waiter, "wait", SampledParams(1, 8));
  auto queued = waiter.Read(10s);
  REQUIRE(queued.has_value());
  CHECK((*queued)["event"] == "queued");
  AwaitQueue(d.socket(), 1, 1);
  auto q = client->Call("queue", {}, 5s);
  REQUIRE(q.ok());
  CHECK((*q)["result"]["waiting"][0]["job_class"] == "generate");
  REQUIRE(client->Call("cancel", {{"job", (*q)["result"]["running"][0]["job"]}}, 5s).ok());
  CHECK(Collect(runner, "run").final()["finish_reason"] == "cancelled");
  CHECK(Collect(waiter, "wait").final()["event"] == "done");
}

TEST_CASE("memory admission per sequence: the third waits for room, the impossible is refused",
          "[e2e][concurrency][memory]") {
  ModelRepo repo;
  const json run = SampledParams(0, 20000);
  // On the CPU, under the test switch (as memory_budget_e2e_test.cc): on a
  // GPU, what LibTorch keeps after the first run (cuBLAS's workspace) counts
  // as held too, and the margins below are sized for the estimates alone.
  // The daemon's own estimate of one run, and what the loaded weights hold,
  // from the refusal of a budget too small for anything.
  double run_mib = 0, held_mib = 0;
  {
    DaemonProcess probe(DaemonArgs(repo, {"--device", "cpu", "--dtype", "fp32",
                                          "--test-fault-injection", "--max-gpu-memory-mb", "1"}));
    const Run refused = Generate(probe.socket(), run);
    REQUIRE(refused.final()["code"] == "INSUFFICIENT_MEMORY");
    const std::string message = refused.final()["message"];
    std::smatch m;
    REQUIRE(std::regex_search(message, m, std::regex("estimated ([0-9.]+) MiB")));
    run_mib = std::stod(m[1]);
    REQUIRE(std::regex_search(message, m, std::regex("of which ([0-9.]+) MiB")));
    held_mib = std::stod(m[1]);
  }
  REQUIRE(run_mib >= 3);  // room for rounding between two and three runs
  const int budget = static_cast<int>(std::ceil(held_mib + 2.5 * run_mib));
  DaemonProcess d(
      DaemonArgs(repo, {"--device", "cpu", "--dtype", "fp32", "--test-fault-injection",
                        "--max-gpu-memory-mb", std::to_string(budget), "--max-concurrent", "4"}));
  std::vector<std::unique_ptr<RawClient>> clients;
  std::vector<std::string> jobs;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(std::make_unique<RawClient>(d.socket()));
    SendGenerate(*clients.back(), i, SampledParams(i, 20000));
    jobs.push_back(AwaitFirstToken(*clients.back(), i));
  }
  // The third has a slot (max_concurrent 4) but not the memory: it waits.
  RawClient third(d.socket());
  SendGenerate(third, "third", SampledParams(2, 20000));
  CHECK_FALSE(TokenWithin(third, "third", 1500ms));
  // One that could never fit beside the weights is refused at once.
  const Run huge = Generate(d.socket(), SampledParams(3, 130000));
  CHECK(huge.final()["code"] == "INSUFFICIENT_MEMORY");
  // One of the two ends: the third is admitted.
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client->Call("cancel", {{"job", jobs[0]}}, 5s).ok());
  CHECK(TokenWithin(third, "third", 10s));
}

}  // namespace medq::test
