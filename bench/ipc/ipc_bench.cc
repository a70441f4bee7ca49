// ipc_bench: what the daemon adds per request. Measures `health` round trips
// over one connection and over many concurrent ones, and the whole-process
// time of `medq health`. Prints one JSON object. See bench/README.md.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ipc/client.h"

extern char** environ;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

json Summary(const std::vector<double>& runs) {
  return {{"median", Percentile(runs, 0.5)},
          {"min", *std::min_element(runs.begin(), runs.end())},
          {"max", *std::max_element(runs.begin(), runs.end())}};
}

struct RoundTrips {
  double per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// `connections` threads, each with its own connection, `calls` health calls each.
RoundTrips MeasureRoundTrips(const std::string& socket, int connections, int calls) {
  std::vector<std::vector<double>> latencies(static_cast<size_t>(connections));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      auto client = medq::ipc::Client::Connect(socket);
      if (!client.ok()) {
        ++failures;
        return;
      }
      auto& mine = latencies[static_cast<size_t>(c)];
      mine.reserve(static_cast<size_t>(calls));
      for (int i = 0; i < calls; ++i) {
        const auto s = Clock::now();
        auto r = client->Call("health", {}, std::chrono::seconds(10));
        if (!r.ok()) ++failures;
        mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failures > 0) {
    std::cerr << "ipc_bench: " << failures << " calls failed\n";
    std::exit(1);
  }
  std::vector<double> all;
  for (auto& v : latencies)
    all.insert(all.end(), v.begin(), v.end());
  return {static_cast<double>(all.size()) / seconds, Percentile(all, 0.5), Percentile(all, 0.99)};
}

pid_t Spawn(const std::vector<std::string>& args, bool quiet) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Wall time of whole `medq health` processes, in milliseconds.
std::vector<double> MeasureCli(const std::string& medq, const std::string& socket, int runs) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto s = Clock::now();
    pid_t pid = Spawn({medq, "--socket", socket, "health"}, true);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "ipc_bench: medq health failed\n";
      std::exit(1);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ipc_bench: health round trips through medqd, and `medq health` process time"};
  std::string socket, medqd = MEDQ_BINARY_DIR "/daemon/medqd", medq = MEDQ_BINARY_DIR "/cli/medq";
  int calls = 5000, connections = 32, repeat = 3, cli_runs = 50;
  app.add_option("--socket", socket, "Use a running daemon instead of starting one");
  app.add_option("--medqd", medqd, "medqd binary to start")->capture_default_str();
  app.add_option("--medq", medq, "medq binary to time")->capture_default_str();
  app.add_option("--calls", calls, "Round trips per connection")->capture_default_str();
  app.add_option("--connections", connections, "Concurrent connections")->capture_default_str();
  app.add_option("--repeat", repeat, "Repetitions of each measurement")->capture_default_str();
  app.add_option("--cli-runs", cli_runs, "medq processes per repetition")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  pid_t daemon = -1;
  std::string dir;
  if (socket.empty()) {
    char tmpl[] = "/tmp/medq-bench.XXXXXX";
    dir = mkdtemp(tmpl);
    socket = dir + "/medq.sock";
    daemon = Spawn({medqd, "--socket", socket, "--state-dir", dir + "/state", "--config",
                    "/dev/null", "--log-level", "warn"},
                   false);
    for (int i = 0; i < 500; ++i) {
      if (auto c = medq::ipc::Client::Connect(socket); c.ok() && c->Call("health").ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::vector<double> one_rps, one_p50, one_p99, many_rps, many_p50, many_p99, cli_p50, cli_p90;
  for (int r = 0; r < repeat; ++r) {
    RoundTrips one = MeasureRoundTrips(socket, 1, calls);
    one_rps.push_back(one.per_second);
    one_p50.push_back(one.p50_us);
    one_p99.push_back(one.p99_us);
    RoundTrips many = MeasureRoundTrips(socket, connections, std::max(1, calls / connections * 4));
    many_rps.push_back(many.per_second);
    many_p50.push_back(many.p50_us);
    many_p99.push_back(many.p99_us);
    std::vector<double> cli = MeasureCli(medq, socket, cli_runs);
    cli_p50.push_back(Percentile(cli, 0.5));
    cli_p90.push_back(Percentile(cli, 0.9));
  }

  if (daemon > 0) {
    kill(daemon, SIGTERM);
    waitpid(daemon, nullptr, 0);
    std::filesystem::remove_all(dir);
  }

  json out = {
      {"benchmark", "ipc"},
      {"cores", std::thread::hardware_concurrency()},
      {"repeat", repeat},
      {"one_connection",
       {{"calls", calls},
        {"round_trips_per_s", Summary(one_rps)},
        {"p50_us", Summary(one_p50)},
        {"p99_us", Summary(one_p99)}}},
      {"concurrent",
       {{"connections", connections},
        {"round_trips_per_s", Summary(many_rps)},
        {"p50_us", Summary(many_p50)},
        {"p99_us", Summary(many_p99)}}},
      {"medq_health_process",
       {{"runs", cli_runs}, {"p50_ms", Summary(cli_p50)}, {"p90_ms", Summary(cli_p90)}}},
  };
  std::cout << out.dump(2) << "\n";
  return 0;
}
