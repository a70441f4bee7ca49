// One daemon under 1,000 concurrent connections (bench/load/load_driver.h):
// most idle, some generating, some sending garbage or half lines, some
// cut mid-stream, one past max_connections. Bounds here are generous, for
// the sanitizer builds; the timings themselves are bench/load's.
#include <sys/resource.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <iostream>

#include "bench/load/load_driver.h"
#include "ipc/client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/skip.h"

namespace medq::test {

using namespace std::chrono_literals;

TEST_CASE("1000 connections at once: health answers and every request gets one reply",
          "[e2e][load]") {
  constexpr int kConnections = 1000;
  constexpr rlim_t kOpenFiles = 4096;
  // This process holds every connection too.
  rlimit limit{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &limit) == 0);
  if (limit.rlim_max < kOpenFiles) {
    MEDQ_SKIP("the open-file hard limit (" << limit.rlim_max << ") is below " << kOpenFiles);
  }
  limit.rlim_cur = std::max(limit.rlim_cur, kOpenFiles);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &limit) == 0);

  DaemonProcess d({"--max-connections", std::to_string(kConnections + 1), "--idle-timeout-s", "600",
                   "--max-queue", "64", "--max-concurrent", "4"},
                  60s, true, kOpenFiles);
  {
    // The demo model is loaded before the load, so that RSS measures the
    // connections and not the model.
    auto warm = ipc::Client::Connect(d.socket());
    REQUIRE(warm.ok());
    auto done = warm->Call("generate", {{"prompt", "Hello"}, {"max_tokens", 2}}, 60s);
    REQUIRE(done.ok());
    REQUIRE((*done)["event"] == "done");
  }
  bench::LoadOptions options;
  options.socket = d.socket();
  options.connections = kConnections;
  options.max_tokens = 8;
  options.hold = 3s;
  options.timeout = 90s;
  const bench::LoadReport r = bench::RunLoad(options);
  std::cout << "load_e2e_test: " << r.seconds << " s, health p50 "
            << bench::Percentile(r.health_ms, 0.5) << " ms, max "
            << bench::Percentile(r.health_ms, 1) << " ms over " << r.health_ms.size() << " probes, "
            << r.generations << " generations; RSS start " << (r.rss_start >> 20) << " MiB, peak "
            << (r.rss_peak >> 20) << " MiB, end " << (r.rss_end >> 20) << " MiB\n";

  for (const std::string& p : r.problems)
    UNSCOPED_INFO(p);
  CHECK(r.problems.empty());
  CHECK_FALSE(r.timed_out);
  CHECK(r.connected == kConnections);
  // Every well-formed request got exactly one final reply.
  CHECK(r.requests > options.generating + options.garbage);
  CHECK(r.answered_once == r.requests);
  CHECK(r.unanswered == 0);
  CHECK(r.answered_twice == 0);
  CHECK(r.garbage_errors == r.garbage_lines);
  CHECK(r.disconnected == options.disconnecting);
  CHECK(r.unexpected_closes == 0);
  // Health kept answering, never slowly enough to look hung.
  CHECK(r.health_ms.size() >= 10);
  CHECK(r.health_errors == 0);
  CHECK(bench::Percentile(r.health_ms, 1) < 2000);
  // Memory stays bounded: each connection holds a read buffer and little else.
  CHECK(r.rss_start > 0);
  CHECK(r.rss_peak - r.rss_start < (512 << 20));
  // The connection past the limit was told to retry, then closed.
  REQUIRE(r.past_limit_reply.has_value());
  CHECK((*r.past_limit_reply)["code"] == "NOT_READY");
  CHECK(r.past_limit_reply->contains("retry_after_s"));
  CHECK(r.past_limit_closed);
  RequireHealthy(d.socket());
}

}  // namespace medq::test
