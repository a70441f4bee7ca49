// load_bench: `health` latency and the daemon's RSS while 1,000 client
// connections are open against one medqd (most idle, some generating with
// the built-in demo model, some sending garbage or half lines, some cut
// mid-stream, one past max_connections): the load of load_driver.h, held
// for --hold-s after every reply has come. One JSON object on stdout.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/bench_daemon.h"
#include "bench/load/load_driver.h"
#include "ipc/client.h"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Raises this process's (and so the daemon's) open-file limit for the
// connections; returns the soft limit in force.
rlim_t RaiseOpenFiles() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"load_bench: health latency and RSS under 1,000 client connections"};
  std::string medqd = MEDQ_BINARY_DIR "/daemon/medqd";
  medq::bench::LoadOptions options;
  options.max_tokens = 16;
  double hold_s = 10;
  app.add_option("--medqd", medqd, "medqd binary")->capture_default_str();
  app.add_option("--connections", options.connections, "Load connections beside the probe")
      ->capture_default_str();
  app.add_option("--generating", options.generating, "Of which generating")->capture_default_str();
  app.add_option("--max-tokens", options.max_tokens, "Tokens per generation")
      ->capture_default_str();
  app.add_option("--hold-s", hold_s, "Seconds the load is held after every reply came")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  options.hold = std::chrono::milliseconds(static_cast<int64_t>(hold_s * 1000));

  const rlim_t open_files = RaiseOpenFiles();
  if (open_files < static_cast<rlim_t>(2 * options.connections + 300)) {
    std::cerr << "load_bench: the open-file limit (" << open_files << ") is too low for "
              << options.connections << " connections; raise it (ulimit -Hn)\n";
    return 1;
  }
  char tmpl[] = "/tmp/medq-load.XXXXXX";
  const fs::path dir = mkdtemp(tmpl);
  options.socket = (dir / "medq.sock").string();
  const pid_t daemon = medq::bench::StartDaemon(
      medqd, options.socket,
      {"--max-connections", std::to_string(options.connections + 1), "--idle-timeout-s", "600",
       "--max-queue", "64", "--max-concurrent", "4"});
  if (daemon < 0) {
    std::cerr << "load_bench: " << medqd << " did not come up on " << options.socket << "\n";
    return 1;
  }
  // Ready, and the demo model loaded by one generation, before the load.
  bool warmed = false;
  for (int i = 0; i < 500 && !warmed; ++i) {
    auto c = medq::ipc::Client::Connect(options.socket);
    if (c.ok()) {
      auto h = c->Call("health");
      if (h.ok() && (*h)["result"]["ready"] == true) {
        auto g = c->Call("generate", {{"prompt", "Hello"}, {"max_tokens", 2}});
        warmed = g.ok() && (*g)["event"] == "done";
        if (!warmed) break;
      }
    }
    if (!warmed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  json out;
  int rc = 0;
  if (!warmed) {
    std::cerr << "load_bench: medqd did not come up or could not generate\n";
    rc = 1;
  } else {
    medq::bench::LoadReport r;
    try {
      r = medq::bench::RunLoad(options);
    } catch (const std::exception& e) {
      std::cerr << "load_bench: " << e.what() << "\n";
      rc = 1;
    }
    const auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
    out = {{"benchmark", "load"},
           {"connections", options.connections},
           {"seconds", r.seconds},
           {"health_ms",
            {{"count", r.health_ms.size()},
             {"p50", medq::bench::Percentile(r.health_ms, 0.5)},
             {"p99", medq::bench::Percentile(r.health_ms, 0.99)},
             {"max", medq::bench::Percentile(r.health_ms, 1)}}},
           {"rss_mb",
            {{"start", mib(r.rss_start)}, {"peak", mib(r.rss_peak)}, {"end", mib(r.rss_end)}}},
           {"generations", r.generations},
           {"requests", r.requests},
           {"answered_once", r.answered_once},
           {"unanswered", r.unanswered},
           {"answered_twice", r.answered_twice},
           {"garbage_errors", r.garbage_errors},
           {"disconnected", r.disconnected},
           {"unexpected_closes", r.unexpected_closes},
           {"past_limit_reply", r.past_limit_reply.value_or(json())},
           {"problems", r.problems}};
    if (!r.problems.empty()) rc = 1;
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  fs::remove_all(dir);
  if (!out.is_null()) std::cout << out.dump(2) << "\n";
  return rc;
}
