// concurrency_bench: what several clients get from one medqd, and what the
// daemon adds on top of the engine's batch. For a random-weight model of a
// real shape and each count of concurrent clients N (1, 2, 4, 8 by default):
//   - engine: the continuous batch alone with N sequences, in a process of
//     its own (this program again, --serve-engine) that loads the model
//     once and stays up (bench/engine/resident_child.h, ServeBatchSteps):
//     ms per step;
//   - daemon: N clients on their own connections send one generate each at
//     the same moment to a medqd with max_concurrent = the largest N; each
//     client's ms per token is the time between its first and last token
//     over the tokens between them (sockets, queue, detokenization, events
//     included); aggregate tok/s = N / that;
//   - the same run inside the daemon: its worker's own ms per token (the done
//     event's decode_ms, first to last token, over the tokens between), so
//     that what the socket, the loop and the events add (client - worker) is
//     told apart from how fast the engine runs in the daemon's process
//     (worker - engine);
//   - how far apart the clients' first tokens came (0 when all started in
//     one step) and the pace of the client whose first token came first,
//     each repetition: a later start puts its prompt into the first
//     client's window;
//   - overhead per token: daemon ms per token - engine ms per step, at N;
//   - with the largest N running, `health` and `queue` round trips, in one
//     more run after the timed ones, so that they do not slow those.
// Each engine run and the daemon run of the same N are paired back to back,
// so that the machine's drift (its speed moves by several percent within
// minutes) hits both alike; which of the two goes first flips each
// repetition. Both processes stay up throughout, with the model loaded: no
// large free happens between runs (a VM that hands freed memory back to
// its host runs slower for some seconds after one). Medians and ranges over
// repetitions. One JSON object on stdout.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/bench_daemon.h"
#include "bench/common/crash_trace.h"
#include "bench/common/remove_tree.h"
#include "bench/engine/batch_bench.h"
#include "bench/engine/random_model.h"
#include "bench/engine/resident_child.h"
#include "daemon/engine/blas_threads.h"
#include "ipc/client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string shape = "SmolLM-135M";
  std::string dtype = "bf16";
  std::string device = "cpu";  // the engine's and the daemon's: cpu or cuda:N
  std::vector<int> clients = {1, 2, 4, 8};
  int tokens = 64;
  int prompt_tokens = 16;
  int repetitions = 4;  // even: as many runs with the engine first as with the daemon
  int threads = 0;
  bool reload = false;
  bool control = false;  // a second engine child beside the first
  // Set in the engine's child: serve timings of the model there
  // (ServeBatchSteps) on standard input and output.
  std::string serve_engine;
  std::string medqd = MEDQ_BINARY_DIR "/daemon/medqd";
};

// The middle value; of an even count, the mean of the middle two.
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

json Summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {{"median", Median(v)}, {"min", v.front()}, {"max", v.back()}};
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1)))];
}

pid_t g_daemon = -1;  // killed on the way out

// Any thread: no static destructors run (another thread may be mid-call).
[[noreturn]] void Die(const std::string& what) {
  std::cerr << "concurrency_bench: " << what << std::endl;
  if (g_daemon > 0) kill(g_daemon, SIGKILL);
  std::_Exit(1);
}

std::vector<int32_t> Prompt(int client, int length, int64_t vocab) {
  std::vector<int32_t> ids;
  uint64_t x = 977 + 7919 * static_cast<uint64_t>(client);
  for (int i = 0; i < length; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3)));
  }
  return ids;
}

// Ms per token of one generate, between its first and last token: as the
// client received them, and as the daemon's worker produced them (the done
// event's decode_ms). 0 when fewer than two came.
struct TokenPace {
  double client_ms = 0;
  double worker_ms = 0;
  Clock::time_point first;  // when its first token came
};

// One generate on its own connection, sent once every client has connected
// (`connected` counts them down). The clients block until then rather than
// spin: spinning threads would take the cores from the daemon just when it
// reads the first requests, and real clients do not spin.
TokenPace ClientRun(const std::string& socket, const json& params, std::latch& connected) {
  auto client = medq::ipc::Client::Connect(socket);
  if (!client.ok()) Die(client.error().message);
  connected.arrive_and_wait();
  auto id = client->Send("generate", params);
  if (!id.ok()) Die(id.error().message);
  Clock::time_point first, last;
  int count = 0;
  double decode_ms = 0;
  for (;;) {
    auto reply = client->ReadReply(std::chrono::minutes(10));
    if (!reply.ok()) Die(reply.error().message);
    const std::string event = (*reply)["event"];
    if (event == "token") {
      last = Clock::now();
      if (count++ == 0) first = last;
    } else if (event == "error") {
      Die(reply->dump());
    } else if (event == "done") {
      decode_ms = reply->value("/timings/decode_ms"_json_pointer, 0.0);
      break;
    }
  }
  if (count < 2) return {};
  return {std::chrono::duration<double, std::milli>(last - first).count() / (count - 1),
          decode_ms / (count - 1), first};
}

// Round trips of `health` and `queue` on one connection until `stop`.
std::vector<double> PollLatency(const std::string& socket, const std::atomic<bool>& stop) {
  std::vector<double> ms;
  auto client = medq::ipc::Client::Connect(socket);
  if (!client.ok()) Die(client.error().message);
  while (!stop.load()) {
    for (const char* op : {"health", "queue"}) {
      const auto t0 = Clock::now();
      if (!client->Call(op, medq::Params::object(), std::chrono::seconds(10)).ok()) Die(op);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return ms;
}

// What one run of n concurrent generates gave: each client's TokenPace
// (those that got two tokens or more); how far apart their first tokens
// came (0 when all started in one step) and the pace of the client whose
// first token came first (whose window holds the prompts of any that
// started later); and with `poll` the health and queue round trips timed
// while all n ran.
struct ClientsRun {
  std::vector<double> client_ms, worker_ms, poll_ms;
  double start_spread_ms = 0, first_client_ms = 0;
};

ClientsRun RunClients(const std::string& socket, int n, const Options& o, int64_t vocab,
                      bool poll) {
  std::latch connected(n);
  std::atomic<bool> stop{false};
  std::vector<TokenPace> per_client(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int c = 0; c < n; ++c) {
    // Ids: the random model has no tokenizer, so only ids make events.
    const json params = {{"prompt_ids", Prompt(c + 1, o.prompt_tokens, vocab)},
                         {"max_tokens", o.tokens},
                         {"return_ids", true}};
    threads.emplace_back([&, c, params] {
      per_client[static_cast<size_t>(c)] = ClientRun(socket, params, connected);
    });
  }
  ClientsRun run;
  std::thread poller;
  if (poll) {
    poller = std::thread([&] {
      connected.wait();
      run.poll_ms = PollLatency(socket, stop);
    });
  }
  for (std::thread& t : threads)
    t.join();
  stop = true;
  if (poller.joinable()) poller.join();
  const TokenPace* earliest = nullptr;
  const TokenPace* latest = nullptr;
  for (const TokenPace& p : per_client) {
    if (p.client_ms == 0) continue;
    run.client_ms.push_back(p.client_ms);
    run.worker_ms.push_back(p.worker_ms);
    if (earliest == nullptr || p.first < earliest->first) earliest = &p;
    if (latest == nullptr || p.first > latest->first) latest = &p;
  }
  if (earliest != nullptr) {
    run.start_spread_ms =
        std::chrono::duration<double, std::milli>(latest->first - earliest->first).count();
    run.first_client_ms = earliest->client_ms;
  }
  return run;
}

// What the engine's child times: o.tokens steps of prompts of
// o.prompt_tokens, on o.threads threads. The child reads them from the
// arguments EngineArgs gives it, so the two change together.
medq::bench::BatchBenchOptions EngineOptions(const Options& o) {
  medq::bench::BatchBenchOptions e;
  e.prompt_tokens = o.prompt_tokens;
  e.decode_steps = o.tokens;
  e.threads = o.threads;
  e.device = o.device;
  // Packed as the daemon, whose max_concurrent is the largest client count.
  e.pack = *std::max_element(o.clients.begin(), o.clients.end()) > 1;
  return e;
}

// The command line of the engine's child: this program, serving the model
// at `model` with what EngineOptions reads.
std::vector<std::string> EngineArgs(const Options& o, const fs::path& model) {
  std::vector<std::string> args = {"/proc/self/exe",
                                   "--serve-engine=" + model.string(),
                                   "--dtype=" + o.dtype,
                                   "--device=" + o.device,
                                   "--tokens=" + std::to_string(o.tokens),
                                   "--prompt-tokens=" + std::to_string(o.prompt_tokens),
                                   "--threads=" + std::to_string(o.threads),
                                   "--clients"};
  for (const int n : o.clients)
    args.push_back(std::to_string(n));
  return args;
}

pid_t StartDaemon(const Options& o, const fs::path& models, const std::string& socket) {
  const int max_clients = *std::max_element(o.clients.begin(), o.clients.end());
  const pid_t pid = medq::bench::StartDaemon(
      o.medqd, socket,
      {"--models-dir", models.string(), "--model", o.shape, "--dtype", o.dtype, "--device",
       o.device, "--threads", std::to_string(o.threads), "--max-queue", "64", "--max-concurrent",
       std::to_string(max_clients)});
  if (pid < 0) Die("medqd did not come up");
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: as medqd does
  medq::bench::PrintBacktraceOnCrash();
  Options o;
  CLI::App app{"concurrency_bench: concurrent clients through medqd against the engine's batch"};
  app.add_option("--shape", o.shape, "SmolLM-135M or Qwen2.5-0.5B")->capture_default_str();
  app.add_option("--dtype", o.dtype, "Weights in memory: bf16 or fp32")->capture_default_str();
  app.add_option("--device", o.device, "Where the engine and the daemon run: cpu or cuda:N")
      ->capture_default_str();
  app.add_option("--clients", o.clients, "Concurrent client counts")->capture_default_str();
  app.add_option("--tokens", o.tokens, "New tokens per request")->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens, "Prompt tokens")->capture_default_str();
  app.add_option("--repetitions", o.repetitions, "Repetitions")->capture_default_str();
  app.add_option("--threads", o.threads, "Engine threads (0: every core)")->capture_default_str();
  app.add_option("--medqd", o.medqd, "medqd binary")->capture_default_str();
  app.add_flag("--control", o.control,
               "Time a second engine child, loaded as the first, in each repetition too: how "
               "far apart two identical engines in two processes run is as finely as the "
               "daemon's overhead can be told on this machine");
  app.add_flag("--reload", o.reload,
               "Unload and load the model before each daemon run (the engines load theirs "
               "once)");
  // The engine's child is this program again, with this option (no group:
  // not in --help).
  app.add_option("--serve-engine", o.serve_engine)->group("");
  CLI11_PARSE(app, argc, argv);
  if (!o.serve_engine.empty()) {
    // Replies go to the pipe that standard output was; anything else that
    // writes to standard output (a log line) goes to standard error instead.
    const int replies = dup(STDOUT_FILENO);
    if (replies < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 1;
    medq::bench::ServeBatchSteps(o.serve_engine, o.dtype, EngineOptions(o), STDIN_FILENO, replies);
    return 0;
  }

  medq::bench::ModelShape shape;
  for (const medq::bench::ModelShape& s : medq::bench::BenchShapes()) {
    if (s.name == o.shape) shape = s;
  }
  if (shape.name.empty()) Die("unknown shape " + o.shape);
  char tmpl[] = "/tmp/medq-concurrency.XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  const fs::path model_dir = dir / "models" / shape.name;
  if (auto st = medq::bench::WriteRandomModel(shape, model_dir); !st.ok()) {
    Die(st.error().message);
  }
  {
    // Random weights pick the end-of-sequence id as readily as any other; the
    // last id of the vocabulary instead, so that runs go to max_tokens (the
    // engine's side runs without stop ids).
    const fs::path config = model_dir / "config.json";
    std::ifstream in(config);
    json c = json::parse(in);
    c["eos_token_id"] = shape.vocab - 1;
    std::ofstream(config) << c.dump(2);
  }
  // Each loads the model before the next process starts.
  const std::vector<std::string> serve = EngineArgs(o, model_dir);
  const auto await_ready = [](medq::bench::ResidentChild& child, const std::string& name) {
    if (const auto ready = child.ReadLine(); ready != "ready") {
      Die(name + ": " + ready.value_or("the child exited"));
    }
  };
  medq::bench::ResidentChild engine(serve);
  await_ready(engine, "engine");
  std::optional<medq::bench::ResidentChild> control;
  if (o.control) await_ready(control.emplace(serve), "control engine");
  // One repetition of n sequences in an engine child: ms per step.
  const auto step_ms = [&](medq::bench::ResidentChild& child, int n, int rep) {
    const auto reply =
        child.Ask(std::to_string(n) + " " + std::to_string(medq::bench::RepetitionSeed(rep)));
    if (!reply || reply->rfind("error", 0) == 0) {
      Die("engine: " + reply.value_or("the child exited"));
    }
    return std::stod(*reply);
  };
  step_ms(engine, 1, 0);  // warm-up, as the daemon's below
  if (control) step_ms(*control, 1, 0);

  const std::string socket = (dir / "medq.sock").string();
  const pid_t daemon = StartDaemon(o, dir / "models", socket);
  g_daemon = daemon;
  {  // load and warm up
    std::latch alone(1);
    ClientRun(socket,
              {{"prompt_ids", Prompt(0, o.prompt_tokens, shape.vocab)},
               {"max_tokens", 4},
               {"return_ids", true}},
              alone);
  }

  const int max_clients = *std::max_element(o.clients.begin(), o.clients.end());
  std::vector<std::vector<double>> engine_ms(o.clients.size()), daemon_ms(o.clients.size()),
      worker_ms(o.clients.size()), start_spread_ms(o.clients.size()),
      first_client_ms(o.clients.size()), control_ms(o.clients.size());
  const auto run_engine = [&](size_t k, int rep) {
    engine_ms[k].push_back(step_ms(engine, o.clients[k], rep));
  };
  const auto run_control = [&](size_t k, int rep) {
    if (control) control_ms[k].push_back(step_ms(*control, o.clients[k], rep));
  };
  const auto run_daemon = [&](size_t k) {
    const int n = o.clients[k];
    if (o.reload) {
      auto c = medq::ipc::Client::Connect(socket);
      if (!c.ok()) Die(c.error().message);
      const medq::Params model = {{"model", o.shape}};
      if (!c->Call("unload", model, std::chrono::minutes(1)).ok()) Die("unload");
      if (!c->Call("load", model, std::chrono::minutes(5)).ok()) Die("load");
    }
    const ClientsRun run = RunClients(socket, n, o, shape.vocab, /*poll=*/false);
    if (run.client_ms.empty()) Die("no client got two tokens");
    daemon_ms[k].push_back(Median(run.client_ms));
    worker_ms[k].push_back(Median(run.worker_ms));
    start_spread_ms[k].push_back(run.start_spread_ms);
    first_client_ms[k].push_back(run.first_client_ms);
  };
  // The engine's and the daemon's runs of each N back to back; which goes
  // first flips each repetition. The control engine, if any, takes the other
  // end: engine, daemon, control, then control, daemon, engine.
  for (int rep = 0; rep < o.repetitions; ++rep) {
    for (size_t k = 0; k < o.clients.size(); ++k) {
      if (rep % 2 == 0) {
        run_engine(k, rep);
        run_daemon(k);
        run_control(k, rep);
      } else {
        run_control(k, rep);
        run_daemon(k);
        run_engine(k, rep);
      }
    }
  }
  // The round trips in a pass of their own: the poller's calls wake the
  // loop and take CPU from the engine, which would skew the rows above.
  const std::vector<double> poll_ms =
      RunClients(socket, max_clients, o, shape.vocab, /*poll=*/true).poll_ms;
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);

  json rows = json::array();
  const double engine_base = Median(engine_ms[0]), daemon_base = Median(daemon_ms[0]);
  for (size_t k = 0; k < o.clients.size(); ++k) {
    const int n = o.clients[k];
    std::vector<double> aggregate, overhead, delivery, in_worker;
    for (size_t r = 0; r < daemon_ms[k].size(); ++r) {
      aggregate.push_back(n * 1000.0 / daemon_ms[k][r]);
      overhead.push_back(daemon_ms[k][r] - engine_ms[k][r]);
      delivery.push_back(daemon_ms[k][r] - worker_ms[k][r]);
      in_worker.push_back(worker_ms[k][r] - engine_ms[k][r]);
    }
    json row = {{"clients", n},
                {"engine_step_ms", Summary(engine_ms[k])},
                {"daemon_ms_per_token", Summary(daemon_ms[k])},
                {"daemon_aggregate_tok_s", Summary(aggregate)},
                {"daemon_per_client_tok_s", 1000.0 / Median(daemon_ms[k])},
                {"overhead_ms_per_token", Summary(overhead)},
                {"daemon_worker_ms_per_token", Summary(worker_ms[k])},
                {"delivery_ms_per_token", Summary(delivery)},
                {"worker_minus_engine_ms_per_token", Summary(in_worker)},
                {"aggregate_ratio_to_first", n * daemon_base / Median(daemon_ms[k])},
                {"latency_ratio_to_first", Median(daemon_ms[k]) / daemon_base},
                {"engine_aggregate_ratio_to_first", n * engine_base / Median(engine_ms[k])},
                // In run order: even repetitions ran the engine first.
                {"each_repetition",
                 {{"engine_step_ms", engine_ms[k]},
                  {"daemon_ms_per_token", daemon_ms[k]},
                  {"daemon_first_client_ms_per_token", first_client_ms[k]},
                  {"daemon_start_spread_ms", start_spread_ms[k]}}}};
    if (control) {
      // Two identical engines, each in a process of its own.
      std::vector<double> apart;
      for (size_t r = 0; r < control_ms[k].size(); ++r)
        apart.push_back(control_ms[k][r] - engine_ms[k][r]);
      row["control_minus_engine_ms_per_token"] = Summary(apart);
      row["each_repetition"]["control_step_ms"] = control_ms[k];
    }
    rows.push_back(std::move(row));
  }
  const json out = {{"benchmark", "concurrency"},
                    {"shape", o.shape},
                    {"dtype", o.dtype},
                    {"device", o.device},
                    {"tokens", o.tokens},
                    {"prompt_tokens", o.prompt_tokens},
                    {"repetitions", o.repetitions},
                    {"reload", o.reload},
                    {"control", o.control},
                    {"rows", rows},
                    {"health_and_queue_ms_with_" + std::to_string(max_clients) + "_running",
                     {{"calls", poll_ms.size()},
                      {"p50", poll_ms.empty() ? 0 : Percentile(poll_ms, 0.5)},
                      {"p99", poll_ms.empty() ? 0 : Percentile(poll_ms, 0.99)},
                      {"max", poll_ms.empty() ? 0 : Percentile(poll_ms, 1)}}}};
  // The figures first: a cleanup that fails (on the H200 it once crashed,
  // remove_tree.h says why) must not take them with it.
  std::cout << out.dump(2) << std::endl;
  medq::bench::RemoveTree(dir.string());
  return 0;
}
