// embed_clients_bench: what dynamic batching gives concurrent embedding
// clients. Two medqd daemons with the same embedding model (all-MiniLM-L6-v2
// by default, through a models dir holding links to its files):
//   - batched: the default batcher (embed_max_batch 32, or --max-batch);
//   - one at a time: embed_max_batch 1, so that every forward pass embeds
//     one text: the clients still send concurrently and wait in the
//     batcher, but the engine serves their texts one after another, as a
//     daemon without dynamic batching would;
// and the same --clients (32) clients on their own connections, each sending
// --requests single-text `embed` requests in a closed loop (the next one as
// soon as the reply comes), starting together. Throughput: all texts over the
// time from the start to the last reply; latency: each request's round trip.
// Rounds alternate the two daemons, so that drift of the machine hits both;
// medians and ranges over rounds. One JSON object on stdout.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/bench_daemon.h"
#include "bench/embeddings/corpus.h"
#include "bench/kernels/timing.h"
#include "daemon/tokenizer/tokenizer.h"
#include "ipc/client.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Options {
  std::string model = MEDQ_SOURCE_DIR "/.cache/models/all-MiniLM-L6-v2";
  int clients = 32;
  int requests = 20;
  int rounds = 3;
  int threads = 0;
  int max_batch = 32;
  int batch_timeout_ms = 10;
  std::string corpus = "short";
  std::string device;  // medqd's --device; empty: its default (auto)
  std::string medqd = MEDQ_BINARY_DIR "/daemon/medqd";
};

std::vector<pid_t> g_daemons;  // killed on the way out

// Any thread: no static destructors run (another thread may be mid-call).
[[noreturn]] void Die(const std::string& what) {
  std::cerr << "embed_clients_bench: " << what << std::endl;
  for (const pid_t pid : g_daemons)
    kill(pid, SIGKILL);
  std::_Exit(1);
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1)))];
}

pid_t StartDaemon(const Options& o, const fs::path& models, const std::string& model_name,
                  const std::string& socket, int max_batch) {
  const std::string limit = std::to_string(std::max(64, 2 * o.clients));
  std::vector<std::string> args = {"--models-dir",
                                   models.string(),
                                   "--embed-model",
                                   model_name,
                                   "--threads",
                                   std::to_string(o.threads),
                                   "--max-queue",
                                   limit,
                                   "--embed-max-concurrent",
                                   limit,
                                   "--embed-max-batch",
                                   std::to_string(max_batch),
                                   "--embed-batch-timeout-ms",
                                   std::to_string(o.batch_timeout_ms)};
  if (!o.device.empty()) {
    args.push_back("--device");
    args.push_back(o.device);
  }
  const pid_t pid = medq::bench::StartDaemon(o.medqd, socket, args);
  if (pid < 0) Die("medqd did not come up");
  g_daemons.push_back(pid);
  return pid;
}

// One embed of one text; the final reply's result, or Die.
json EmbedOne(medq::ipc::Client& client, const std::string& model, const std::string& text) {
  auto reply = client.Call("embed", {{"model", model}, {"input", text}}, std::chrono::minutes(5));
  if (!reply.ok()) Die(reply.error().message);
  if (auto error = medq::ipc::ErrorOf(*reply)) Die("embed: " + reply->dump());
  const json& result = (*reply)["result"];
  if (!result.contains("embeddings") || result["embeddings"].size() != 1) Die(reply->dump());
  return result;
}

struct RoundResult {
  double texts_s = 0;
  std::vector<double> latency_ms;
  std::vector<double> batch_wait_ms;
  std::vector<double> embed_ms;
};

RoundResult RunRound(const Options& o, const std::string& socket, const std::string& model,
                     const std::vector<std::string>& texts) {
  RoundResult out;
  std::vector<std::vector<double>> latency(static_cast<size_t>(o.clients));
  std::vector<std::vector<double>> wait(static_cast<size_t>(o.clients));
  std::vector<std::vector<double>> embed(static_cast<size_t>(o.clients));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      auto client = medq::ipc::Client::Connect(socket);
      if (!client.ok()) Die(client.error().message);
      ++ready;
      while (!go.load())
        std::this_thread::yield();
      const size_t k = static_cast<size_t>(c);
      for (int i = 0; i < o.requests; ++i) {
        const std::string& text =
            texts[(k * static_cast<size_t>(o.requests) + static_cast<size_t>(i)) % texts.size()];
        const auto t0 = Clock::now();
        const json result = EmbedOne(*client, model, text);
        latency[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        const json& timings = result["timings"];
        wait[k].push_back(timings.value("batch_wait_ms", 0.0));
        embed[k].push_back(timings.value("embed_ms", 0.0));
      }
    });
  }
  while (ready.load() < o.clients)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = Clock::now();
  go = true;
  for (std::thread& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  out.texts_s = static_cast<double>(o.clients) * o.requests / seconds;
  for (size_t k = 0; k < latency.size(); ++k) {
    out.latency_ms.insert(out.latency_ms.end(), latency[k].begin(), latency[k].end());
    out.batch_wait_ms.insert(out.batch_wait_ms.end(), wait[k].begin(), wait[k].end());
    out.embed_ms.insert(out.embed_ms.end(), embed[k].begin(), embed[k].end());
  }
  return out;
}

struct Mode {
  std::string name;
  int max_batch;
  std::string socket;
  std::vector<double> texts_s, p50, p99;
  std::vector<double> latency_ms, batch_wait_ms, embed_ms;  // every request of every round

  json Json(const Options& o) const {
    return {{"embed_max_batch", max_batch},
            {"embed_batch_timeout_ms", o.batch_timeout_ms},
            {"texts_s", medq::bench::Summary(texts_s)},
            {"latency_ms",
             {{"p50", medq::bench::Summary(p50)},
              {"p99", medq::bench::Summary(p99)},
              {"p50_all_rounds", Percentile(latency_ms, 0.5)},
              {"p99_all_rounds", Percentile(latency_ms, 0.99)}}},
            {"daemon_timings_ms_p50",
             {{"batch_wait_ms", Percentile(batch_wait_ms, 0.5)},
              {"embed_ms", Percentile(embed_ms, 0.5)}}}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"embed_clients_bench: concurrent single-text embed clients, batched and not"};
  app.add_option("--model", o.model, "sentence-transformers folder")->capture_default_str();
  app.add_option("--clients", o.clients, "Concurrent clients")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--requests", o.requests, "Requests per client per round")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--rounds", o.rounds, "Rounds of each mode, alternating")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "medqd --threads (0: every core)")->capture_default_str();
  app.add_option("--max-batch", o.max_batch, "embed_max_batch of the batched daemon")
      ->capture_default_str();
  app.add_option("--batch-timeout-ms", o.batch_timeout_ms, "embed_batch_timeout_ms of both")
      ->capture_default_str();
  app.add_option("--corpus", o.corpus, "The texts: short, tok128 (128 tokens each), tokN")
      ->capture_default_str();
  app.add_option("--device", o.device, "medqd --device (cpu, cuda:N; default: medqd's, auto)");
  app.add_option("--medqd", o.medqd, "medqd binary")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // The texts (corpus.h), tokenized as the daemon will.
  const fs::path model_dir = fs::absolute(o.model);
  medq::engine::EmbeddingInfo info;
  {
    std::ifstream in(model_dir / "sentence_bert_config.json");
    const json c = json::parse(in, nullptr, false);
    if (c.is_object()) {
      info.max_seq_length = c.value("max_seq_length", int64_t{0});
      info.do_lower_case = c.value("do_lower_case", false);
    }
  }
  auto tok = medq::tokenizer::Tokenizer::FromModelDir(model_dir);
  if (!tok.ok()) Die(tok.error().message);
  medq::bench::EmbedCorpus corpus;
  if (o.corpus == "short") {
    corpus = medq::bench::ShortCorpus(**tok, info, 256);
  } else if (o.corpus.rfind("tok", 0) == 0 && o.corpus.size() > 3 &&
             o.corpus.find_first_not_of("0123456789", 3) == std::string::npos) {
    auto c = medq::bench::FixedLengthCorpus(**tok, info, 256, std::stoi(o.corpus.substr(3)));
    if (!c.ok()) Die(c.error().message);
    corpus = std::move(c).value();
  } else {
    Die("unknown corpus '" + o.corpus + "' (short, tok128, tokN)");
  }

  char tmpl[] = "/tmp/medq-embed-clients.XXXXXX";
  const char* made = mkdtemp(tmpl);
  if (made == nullptr) Die("mkdtemp");
  const fs::path dir = made;
  const std::string name = model_dir.filename().string();
  // A folder of links to the model's files: medqd refuses a model folder
  // that is itself a link leading outside its models dir.
  fs::create_directories(dir / "models" / name);
  for (const auto& entry : fs::directory_iterator(model_dir))
    fs::create_symlink(entry.path(), dir / "models" / name / entry.path().filename());

  std::vector<Mode> modes = {
      {"batched", o.max_batch, (dir / "batched.sock").string(), {}, {}, {}, {}, {}, {}},
      {"one_at_a_time", 1, (dir / "single.sock").string(), {}, {}, {}, {}, {}, {}}};
  for (Mode& m : modes) {
    StartDaemon(o, dir / "models", name, m.socket, m.max_batch);
    // Load (with its warm-up embed) and a few requests before any timing.
    auto c = medq::ipc::Client::Connect(m.socket);
    if (!c.ok()) Die(c.error().message);
    auto loaded = c->Call("load", {{"model", name}}, std::chrono::minutes(5));
    if (!loaded.ok()) Die(loaded.error().message);
    if (medq::ipc::ErrorOf(*loaded)) Die("load: " + loaded->dump());
    for (int i = 0; i < 4; ++i)
      EmbedOne(*c, name, corpus.texts[static_cast<size_t>(i)]);
  }

  for (int r = 0; r < o.rounds; ++r) {
    for (Mode& m : modes) {
      RoundResult result = RunRound(o, m.socket, name, corpus.texts);
      m.texts_s.push_back(result.texts_s);
      m.p50.push_back(Percentile(result.latency_ms, 0.5));
      m.p99.push_back(Percentile(result.latency_ms, 0.99));
      m.latency_ms.insert(m.latency_ms.end(), result.latency_ms.begin(), result.latency_ms.end());
      m.batch_wait_ms.insert(m.batch_wait_ms.end(), result.batch_wait_ms.begin(),
                             result.batch_wait_ms.end());
      m.embed_ms.insert(m.embed_ms.end(), result.embed_ms.begin(), result.embed_ms.end());
    }
  }
  for (const pid_t pid : g_daemons) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  g_daemons.clear();
  fs::remove_all(dir);

  std::vector<double> ratios;
  for (int r = 0; r < o.rounds; ++r) {
    ratios.push_back(modes[0].texts_s[static_cast<size_t>(r)] /
                     modes[1].texts_s[static_cast<size_t>(r)]);
  }
  const json out = {
      {"benchmark", "embed_clients"},
      {"model", name},
      {"corpus", corpus.name},
      {"device", o.device.empty() ? "auto" : o.device},
      {"clients", o.clients},
      {"requests_per_client", o.requests},
      {"rounds", o.rounds},
      {"threads",
       o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency())},
      {"texts_tokens",
       {{"mean",
         [&] {
           double s = 0;
           for (const int n : corpus.tokens)
             s += n;
           return s / static_cast<double>(corpus.tokens.size());
         }()}}},
      {"batched", modes[0].Json(o)},
      {"one_at_a_time", modes[1].Json(o)},
      {"ratio_batched_to_one_at_a_time",
       {{"of_medians", medq::bench::Summary(modes[0].texts_s)["median"].get<double>() /
                           medq::bench::Summary(modes[1].texts_s)["median"].get<double>()},
        {"per_round", medq::bench::Summary(ratios)}}}};
  std::cout << out.dump(2) << "\n";
  return 0;
}
