// The 1,000-connection load against one medqd, shared by the load benchmark
// (bench/load/load_bench.cc) and its end-to-end test
// (tests/e2e/load_e2e_test.cc). One thread drives every connection with
// poll() and non-blocking sockets:
//   - idle connections, the most: connected and silent;
//   - generating ones: one short generation each, and while the load is
//     held, the next one as soon as one ends;
//   - garbage ones: lines that are not requests, then one well-formed one;
//   - half-line ones: the first half of a request line, then nothing;
//   - disconnecting ones: a long generation, closed after its first reply
//     line (mid-stream), once the limit check below is done;
//   - one connection past the limit, opened after all the others, which
//     must get NOT_READY with retry_after_s and be closed;
//   - a probe that sends `health` again and again and times each answer.
// It counts the final replies (result, done, error) of every well-formed
// request, so that a caller can check each got exactly one. The caller
// starts the daemon with room for `connections` + 1 (the probe) connections
// exactly, a long idle timeout, and an open-file limit to match; this
// process needs about connections + 10 descriptors.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace medq::bench {

struct LoadOptions {
  std::string socket;
  int connections = 1000;  // beside the probe; idle ones are what the others leave
  int generating = 24;
  int garbage = 40;
  int half_lines = 40;
  int disconnecting = 16;
  int max_tokens = 4;               // of each generating connection's generation
  int disconnect_max_tokens = 150;  // long enough to be cut mid-stream
  bool probe_past_limit = true;     // the daemon's max_connections is connections + 1
  std::chrono::milliseconds health_interval{20};
  // After every first reply has come, the load is held this long while the
  // probe goes on: idle connections stay open and each generating one starts
  // a new generation whenever one ends. Then the last ones are waited for.
  std::chrono::milliseconds hold{2000};
  std::chrono::milliseconds timeout{120000};  // the whole run; then it gives up
};

struct LoadReport {
  int connected = 0;          // load connections that connected
  int requests = 0;           // well-formed requests whose sender stayed
  int answered_once = 0;      // of those: exactly one final reply
  int unanswered = 0;         // no final reply by the end
  int answered_twice = 0;     // more than one final reply
  int garbage_lines = 0;      // lines sent that are not requests
  int garbage_errors = 0;     // INVALID_REQUEST replies with a null id
  int disconnected = 0;       // connections closed mid-stream on purpose
  int generations = 0;        // generate requests of the generating connections
  int unexpected_closes = 0;  // connections the daemon closed that should have stayed
  std::optional<nlohmann::json> past_limit_reply;    // the refused connection's line
  bool past_limit_closed = false;                    // and the daemon closed it
  std::vector<double> health_ms;                     // each probe round trip
  int health_errors = 0;                             // health answered with an error
  int64_t rss_start = 0, rss_peak = 0, rss_end = 0;  // the daemon's, from health
  double seconds = 0;                                // the whole run
  bool timed_out = false;
  std::vector<std::string> problems;  // what went wrong, in words (the first few)
};

// Runs the load; never throws for what the daemon does (that goes into the
// report), only for what this process cannot do (socket(), connect()).
LoadReport RunLoad(const LoadOptions& options);

// The p-quantile (0..1) of `v` (nearest rank), 0 when empty.
double Percentile(std::vector<double> v, double p);

}  // namespace medq::bench
