// soak_bench: many generations through a real medqd (cleanup = after-each).
// Prints memory after the requests of a sequential run (it must stay flat:
// the drift of RSS, and on CUDA of reserved memory, between request
// --baseline-at and the last), throughput and
// latency percentiles of sequential and concurrent runs, and the daemon's
// overhead: time to first token through the socket minus the same request on
// the engine alone, in this process. One JSON object on stdout.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/bench_daemon.h"
#include "bench/common/remove_tree.h"
#include "daemon/engine/blas_threads.h"
#include "daemon/engine/engine.h"
#include "ipc/client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

json Summary(const std::vector<double>& v) {
  return {{"p50", Percentile(v, 0.5)},
          {"p90", Percentile(v, 0.9)},
          {"p99", Percentile(v, 0.99)},
          {"min", Percentile(v, 0)},
          {"max", Percentile(v, 1)}};
}

struct Sample {
  double ttft_ms = 0;
  double total_ms = 0;
  int tokens = 0;
};

// One generate request on `client`; exits on failure.
Sample GenerateOnce(medq::ipc::Client& client, const json& params) {
  Sample s;
  const auto t0 = Clock::now();
  auto id = client.Send("generate", params);
  if (!id.ok()) {
    std::cerr << "soak_bench: " << id.error().message << "\n";
    std::exit(1);
  }
  for (;;) {
    auto reply = client.ReadReply(std::chrono::minutes(10));
    if (!reply.ok()) {
      std::cerr << "soak_bench: " << reply.error().message << "\n";
      std::exit(1);
    }
    if ((*reply)["id"] != *id) continue;
    const std::string event = (*reply)["event"];
    if (event == "token" && s.ttft_ms == 0) {
      s.ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    } else if (event == "error") {
      std::cerr << "soak_bench: " << reply->dump() << "\n";
      std::exit(1);
    } else if (event == "done") {
      s.total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      s.tokens = (*reply)["usage"]["completion_tokens"];
      return s;
    }
  }
}

struct DaemonMemory {
  int64_t rss = 0;
  int64_t cuda_reserved = 0;  // summed over the devices; 0 without CUDA
};

DaemonMemory MemoryOf(medq::ipc::Client& client) {
  DaemonMemory m;
  auto h = client.Call("health");
  if (!h.ok()) return m;
  const json& memory = (*h)["result"]["memory"];
  m.rss = memory["rss_bytes"].get<int64_t>();
  for (const json& d : memory.value("devices", json::array()))
    m.cuda_reserved += d.value("reserved_bytes", int64_t{0});
  return m;
}

int64_t DaemonRss(medq::ipc::Client& client) {
  return MemoryOf(client).rss;
}

double DriftPct(double from, double to) {
  return from > 0 ? 100 * (to - from) / from : 0;
}

}  // namespace

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: as medqd does
  CLI::App app{"soak_bench: sequential and concurrent generations through medqd"};
  std::string model = std::string(MEDQ_SHARED_DIR_DEFAULT) + "/fixtures/models/tiny-llama";
  std::string medqd = MEDQ_BINARY_DIR "/daemon/medqd";
  int sequential = 200, concurrent_clients = 8, per_client = 25, max_tokens = 32;
  int baseline_at = 1000;
  app.add_option("--model", model, "Model directory")->capture_default_str();
  app.add_option("--medqd", medqd, "medqd binary")->capture_default_str();
  app.add_option("--sequential", sequential, "Sequential requests")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--clients", concurrent_clients, "Concurrent clients")->capture_default_str();
  app.add_option("--per-client", per_client, "Requests per concurrent client")
      ->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "New tokens per request")->capture_default_str();
  app.add_option("--baseline-at", baseline_at,
                 "The sequential request whose memory the drift is measured from (capped at "
                 "--sequential)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  model = fs::absolute(model).lexically_normal().string();
  // Engine alone, in this process: the same request, for the overhead figure.
  medq::engine::InitWorkerThread(0);
  auto loaded = medq::engine::LoadModel(model, {"cpu", "auto"});
  if (!loaded.ok()) {
    std::cerr << "soak_bench: " << loaded.error().message << "\n";
    return 1;
  }

  // The prompt: ids, so the tokenizer plays no part in the comparison; folded
  // into the model's vocabulary so that any model takes them.
  std::vector<int32_t> prompt_ids = {1, 415, 7749, 403, 10134, 395};
  const int64_t vocab = medq::engine::Info(**loaded).vocab_size;
  for (int32_t& id : prompt_ids)
    id = static_cast<int32_t>(id % vocab);
  const json params = {{"prompt_ids", prompt_ids},
                       {"max_tokens", max_tokens},
                       {"temperature", 0.7},
                       {"seed", 1},
                       {"return_ids", true}};
  std::vector<double> engine_ttft;
  for (int i = 0; i < 20; ++i) {
    medq::engine::GenerateRequest req;
    req.prompt = params["prompt_ids"].get<std::vector<int32_t>>();
    req.max_new_tokens = max_tokens;
    req.sampling.temperature = 0.7f;
    req.sampling.seed = 1;
    const auto t0 = Clock::now();
    double ttft = 0;
    auto r = medq::engine::Generate(**loaded, req, [&](int32_t) {
      if (ttft == 0) ttft = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      return true;
    });
    if (!r.ok()) {
      std::cerr << "soak_bench: engine: " << r.error().message << "\n";
      return 1;
    }
    engine_ttft.push_back(ttft);
  }
  loaded = medq::Error(medq::ErrorCode::kInternal, "released");

  char tmpl[] = "/tmp/medq-soak.XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const std::string socket = (dir / "medq.sock").string();
  const pid_t daemon = medq::bench::StartDaemon(
      medqd, socket,
      {"--max-queue", "64", "--cleanup", "after-each", "--models-dir",
       fs::path(model).parent_path().string(), "--model", fs::path(model).filename().string()});
  if (daemon < 0) {
    std::cerr << "soak_bench: " << medqd << " did not come up on " << socket << "\n";
    return 1;
  }
  auto client = medq::ipc::Client::Connect(socket);
  if (!client.ok()) {
    std::cerr << "soak_bench: cannot connect to medqd on " << socket << ": "
              << client.error().message << "\n";
    kill(daemon, SIGTERM);
    return 1;
  }

  // Sequential: memory after every request (the daemon trims after each);
  // at most ~200 of them are printed.
  std::vector<double> ttft, total, rss_mb, reserved_mb;
  int64_t tokens = 0;
  baseline_at = std::min(baseline_at, sequential);
  const int print_every = std::max(1, sequential / 200);
  const auto t_seq = Clock::now();
  for (int i = 0; i < sequential; ++i) {
    Sample s = GenerateOnce(*client, params);
    ttft.push_back(s.ttft_ms);
    total.push_back(s.total_ms);
    tokens += s.tokens;
    const DaemonMemory m = MemoryOf(*client);
    rss_mb.push_back(static_cast<double>(m.rss) / (1 << 20));
    reserved_mb.push_back(static_cast<double>(m.cuda_reserved) / (1 << 20));
  }
  const double seq_s = std::chrono::duration<double>(Clock::now() - t_seq).count();

  // Concurrent clients, each on its own connection.
  std::mutex mu;
  std::vector<double> c_total;
  int64_t c_tokens = 0;
  const auto t_conc = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrent_clients; ++c) {
    threads.emplace_back([&] {
      auto conn = medq::ipc::Client::Connect(socket);
      if (!conn.ok()) std::exit(1);
      for (int i = 0; i < per_client; ++i) {
        Sample s = GenerateOnce(*conn, params);
        std::lock_guard lock(mu);
        c_total.push_back(s.total_ms);
        c_tokens += s.tokens;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double conc_s = std::chrono::duration<double>(Clock::now() - t_conc).count();
  const double rss_after_concurrent = static_cast<double>(DaemonRss(*client)) / (1 << 20);

  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  medq::bench::RemoveTree(dir.string());

  const double rss_first = rss_mb.front(), rss_last = rss_mb.back();
  const double rss_base = rss_mb[baseline_at - 1];
  const double reserved_base = reserved_mb[baseline_at - 1], reserved_last = reserved_mb.back();
  json rss_each = json::array();
  for (size_t i = 0; i < rss_mb.size(); i += print_every)
    rss_each.push_back(rss_mb[i]);
  json out = {
      {"benchmark", "soak"},
      {"model", model},
      {"max_tokens", max_tokens},
      {"sequential",
       {{"requests", sequential},
        {"requests_per_s", sequential / seq_s},
        {"tokens_per_s", static_cast<double>(tokens) / seq_s},
        {"ttft_ms", Summary(ttft)},
        {"total_ms", Summary(total)},
        {"cleanup", "after-each"},
        {"rss_mb_after_first", rss_first},
        {"baseline_at", baseline_at},
        {"rss_mb_at_baseline", rss_base},
        {"rss_mb_after_last", rss_last},
        {"rss_growth_pct", DriftPct(rss_first, rss_last)},
        {"rss_drift_pct_from_baseline", DriftPct(rss_base, rss_last)},
        {"cuda_reserved_mb_at_baseline", reserved_base},
        {"cuda_reserved_mb_after_last", reserved_last},
        {"cuda_reserved_drift_pct_from_baseline", DriftPct(reserved_base, reserved_last)},
        {"rss_mb_max", *std::max_element(rss_mb.begin(), rss_mb.end())},
        {"rss_mb_every", print_every},
        {"rss_mb_each", rss_each}}},
      {"concurrent",
       {{"clients", concurrent_clients},
        {"requests", concurrent_clients * per_client},
        {"requests_per_s", conc_s > 0 ? concurrent_clients * per_client / conc_s : 0},
        {"tokens_per_s", conc_s > 0 ? static_cast<double>(c_tokens) / conc_s : 0},
        {"total_ms", Summary(c_total)},
        {"rss_mb_after", rss_after_concurrent}}},
      {"overhead",
       {{"engine_ttft_ms_p50", Percentile(engine_ttft, 0.5)},
        {"daemon_ttft_ms_p50", Percentile(ttft, 0.5)},
        {"daemon_minus_engine_ms", Percentile(ttft, 0.5) - Percentile(engine_ttft, 0.5)}}},
  };
  std::cout << out.dump(2) << "\n";
  return 0;
}
