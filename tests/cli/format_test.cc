// The CLI's human-readable output (cli/format.h), from typed results alone.
#include "cli/format.h"

#include <catch2/catch.hpp>

namespace medq::cli {
namespace {

JobInfo Job(const std::string& id, const std::string& state, int position) {
  JobInfo j;
  j.job = id;
  j.op = "generate";
  j.priority = "normal";
  j.state = state;
  j.position = position;
  j.job_class = "generate";
  return j;
}

}  // namespace

TEST_CASE("medq queue counts a generation the worker holds back as starting, not running",
          "[cli][queue]") {
  QueueInfo q;
  q.max_queue = 5;
  q.running = {Job("j1", "running", 0), Job("j2", "starting", 0)};
  q.waiting = {Job("j3", "waiting", 1)};
  const std::string out = FormatQueue(q);
  INFO(out);
  CHECK(out.rfind("running 1, starting 1, waiting 1 of 5\n", 0) == 0);
  CHECK_THAT(out, Catch::Contains("j2       generate         normal  starting"));
  CHECK_THAT(out, Catch::Contains("j1       generate         normal  running"));
}

TEST_CASE("medq queue without a held-back job reads as before", "[cli][queue]") {
  QueueInfo q;
  q.max_queue = 4;
  q.running = {Job("j1", "running", 0)};
  q.totals.processed = 3;
  const std::string out = FormatQueue(q);
  INFO(out);
  CHECK(out.rfind("running 1, waiting 0 of 4\n", 0) == 0);
  CHECK_THAT(out, Catch::Contains("totals: processed 3, rejected 0, timed out 0, cancelled 0"));

  const std::string empty = FormatQueue(QueueInfo{{}, {}, 4, {}});
  CHECK(empty ==
        "running 0, waiting 0 of 4\n"
        "totals: processed 0, rejected 0, timed out 0, cancelled 0\n");
}

}  // namespace medq::cli
