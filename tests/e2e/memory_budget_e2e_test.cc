// The memory budget (max_gpu_memory_mb) end to end. CI has no GPU: the test
// switch --test-fault-injection applies the budget to CPU models too, with
// the weights loaded on the CPU counted as held.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Sends one generate request and returns its final event.
json GenerateFinal(const std::string& socket, const json& params) {
  RawClient c(socket);
  REQUIRE(c.Send(json{{"v", 1}, {"id", 1}, {"op", "generate"}, {"params", params}}.dump() + "\n"));
  for (;;) {
    auto e = c.Read(60s);
    REQUIRE(e.has_value());
    const std::string ev = (*e)["event"];
    if (ev == "done" || ev == "error") return *e;
  }
}

}  // namespace

TEST_CASE("a generate over the memory budget gets INSUFFICIENT_MEMORY, a small one runs",
          "[e2e][generate][memory]") {
  ModelRepo repo;
  // tiny-llama holds about 16 MiB of float32 weights on the CPU; a short run
  // needs well under 1 MiB more, a 1000-token prompt over 4 MiB (activations
  // and KV cache with fused attention, LibTorch 2.5 and later) or over 30 MiB
  // (with the T x T scores of the unfused path).
  // On the CPU (the test switch applies the budget there), also on a machine
  // with a GPU: there the runtime's own fixed memory (cuBLAS's workspaces,
  // made at load) would take more than this budget on its own.
  DaemonProcess d({"--models-dir", repo.dir().string(), "--model", "tiny-llama", "--threads", "1",
                   "--device", "cpu", "--dtype", "fp32", "--test-fault-injection",
                   "--max-gpu-memory-mb", "18"});
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto health = client->Call("health", {}, 5s);
  REQUIRE(health.ok());
  CHECK((*health)["result"]["limits"]["max_gpu_memory_mb"] == 18);

  const std::vector<int32_t> long_prompt(1000, 5);
  json refused = GenerateFinal(d.socket(), {{"prompt_ids", long_prompt}, {"max_tokens", 8}});
  CAPTURE(refused.dump());
  REQUIRE(refused["event"] == "error");
  CHECK(refused["code"] == "INSUFFICIENT_MEMORY");
  REQUIRE(refused.contains("retry_after_s"));
  CHECK(refused["retry_after_s"].get<double>() > 0);
  const std::string message = refused["message"];
  CHECK_THAT(message, Catch::Contains("max_gpu_memory_mb") && Catch::Contains("18.0 MiB") &&
                          Catch::Contains("estimated"));

  json done = GenerateFinal(d.socket(), {{"prompt_ids", {1, 450, 16500, 471}}, {"max_tokens", 8}});
  CAPTURE(done.dump());
  CHECK(done["event"] == "done");
  CHECK(done["usage"]["completion_tokens"].get<int>() >= 1);

  // The CLI exits "retry later" (75) on the refusal, with the hint.
  std::string long_text;
  for (int i = 0; i < 800; ++i)
    long_text += " patient";
  ProcessResult cli = RunMedq(d.socket(), {"generate", "--raw", "--max-tokens", "4", long_text});
  CHECK(cli.status == 75);
  CHECK_THAT(cli.err, Catch::Contains("[INSUFFICIENT_MEMORY]") && Catch::Contains("retry in"));
}

TEST_CASE("without the test switch a CPU model is exempt from max_gpu_memory_mb",
          "[e2e][generate][memory]") {
  ModelRepo repo;
  DaemonProcess d({"--models-dir", repo.dir().string(), "--model", "tiny-llama", "--threads", "1",
                   "--device", "cpu", "--max-gpu-memory-mb", "1"});
  json done = GenerateFinal(d.socket(), {{"prompt_ids", {1, 450, 16500, 471}}, {"max_tokens", 4}});
  CAPTURE(done.dump());
  CHECK(done["event"] == "done");
}

TEST_CASE("a generation the worker holds back for memory is starting in queue, never running",
          "[e2e][generate][memory]") {
  ModelRepo repo;
  // tiny-llama3 holds about 15.7 MiB of float32 weights. The long run (3 ids,
  // 30000 new tokens) needs about 6 MiB more, the short one (300 ids) about
  // 5 MiB: each fits 24 MiB alone, not both together, so the short one waits
  // for memory while the long one runs (max_concurrent 2 gives it a slot).
  DaemonProcess d({"--models-dir", repo.dir().string(), "--model", "tiny-llama3", "--threads", "1",
                   "--device", "cpu", "--dtype", "fp32", "--test-fault-injection",
                   "--max-gpu-memory-mb", "24", "--max-concurrent", "2"});
  RawClient running(d.socket());
  REQUIRE(
      running.Send(json{{"v", 1},
                        {"id", "long"},
                        {"op", "generate"},
                        {"params", {{"prompt_ids", {128000, 1000, 1001}}, {"max_tokens", 30000}}}}
                       .dump() +
                   "\n"));
  std::string long_job;
  for (;;) {
    auto e = running.Read(60s);
    REQUIRE(e.has_value());
    if ((*e)["event"] == "started") long_job = (*e)["job"];
    if ((*e)["event"] == "token") break;
  }
  RawClient held(d.socket());
  REQUIRE(held.Send(json{{"v", 1},
                         {"id", "short"},
                         {"op", "generate"},
                         {"params", {{"prompt_ids", std::vector<int>(300, 5)}, {"max_tokens", 3}}}}
                        .dump() +
                    "\n"));
  std::string short_job;
  for (;;) {
    auto e = held.Read(60s);
    REQUIRE(e.has_value());
    if ((*e)["event"] == "started") {
      short_job = (*e)["job"];
      break;
    }
  }
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  // It has its slot (listed with the running ones), but does not run.
  json q;
  for (int i = 0; i < 50; ++i) {
    auto reply = client->Call("queue", {}, 5s);
    REQUIRE(reply.ok());
    q = (*reply)["result"];
    if (q["running"].size() == 2) break;
    std::this_thread::sleep_for(20ms);
  }
  INFO(q.dump());
  REQUIRE(q["running"].size() == 2);
  for (const json& j : q["running"]) {
    CHECK(j["state"] == (j["job"] == short_job ? "starting" : "running"));
  }
  // `medq queue` counts it as starting too, never as running.
  ProcessResult human = RunMedq(d.socket(), {"queue"});
  CHECK(human.status == 0);
  CHECK_THAT(human.out, Catch::Contains("running 1, starting 1, waiting 0 of"));
  // Once the long one is stopped, the held one runs to its end.
  REQUIRE(client->Call("cancel", {{"job", long_job}}, 5s).ok());
  for (;;) {
    auto e = held.Read(60s);
    REQUIRE(e.has_value());
    if ((*e)["event"] == "error") FAIL(e->dump());
    if ((*e)["event"] == "done") break;
  }
}

}  // namespace medq::test
