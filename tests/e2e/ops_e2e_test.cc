// Every op, through the real `medq` binary and through a raw socket.
#include <catch2/catch.hpp>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"

namespace medq::test {

using nlohmann::json;

TEST_CASE("medq health reports a ready daemon with real data", "[e2e]") {
  DaemonProcess d;
  ProcessResult human = RunMedq(d.socket(), {"health"});
  CHECK(human.status == 0);
  CHECK_THAT(human.out, Catch::Contains("ready"));
  CHECK_THAT(human.out, Catch::Contains("pid " + std::to_string(d.pid())));

  ProcessResult machine = RunMedq(d.socket(), {"health", "--json"});
  REQUIRE(machine.status == 0);
  json h = json::parse(machine.out);
  CHECK(h["status"] == "ok");
  CHECK(h["ready"] == true);
  CHECK(h["pid"] == d.pid());
  CHECK(h["memory"]["rss_bytes"].get<int64_t>() > 1 << 20);
  CHECK(h["uptime_s"].get<double>() >= 0);
  CHECK(h["limits"]["max_connections"] == 256);
  CHECK(h["limits"]["max_queue"].get<int>() > 0);
  CHECK(h["version"].is_string());
}

TEST_CASE("medq queue lists jobs and totals", "[e2e]") {
  DaemonProcess d({"--max-queue", "4"});
  ProcessResult r = RunMedq(d.socket(), {"--json", "queue"});
  REQUIRE(r.status == 0);
  json q = json::parse(r.out);
  CHECK(q["running"].empty());
  CHECK(q["waiting"].empty());
  CHECK(q["max_queue"] == 4);
  CHECK(q["totals"]["processed"] == 0);

  // A cleanup is a worker job: it shows up in the totals afterwards.
  REQUIRE(RunMedq(d.socket(), {"cleanup-memory"}).status == 0);
  json after = json::parse(RunMedq(d.socket(), {"--json", "queue"}).out);
  CHECK(after["totals"]["processed"] == 1);
  ProcessResult human = RunMedq(d.socket(), {"queue"});
  CHECK(human.status == 0);
  CHECK_THAT(human.out, Catch::Contains("processed 1"));
}

TEST_CASE("medq cleanup-memory reports memory before and after", "[e2e]") {
  DaemonProcess d;
  ProcessResult r = RunMedq(d.socket(), {"cleanup-memory", "--json"});
  REQUIRE(r.status == 0);
  json c = json::parse(r.out);
  CHECK(c["before"]["rss_bytes"].get<int64_t>() > 0);
  CHECK(c["after"]["rss_bytes"].get<int64_t>() > 0);
  CHECK(c["duration_ms"].get<double>() >= 0);
  ProcessResult human = RunMedq(d.socket(), {"cleanup-memory"});
  CHECK(human.status == 0);
  CHECK_THAT(human.out, Catch::Contains("before") && Catch::Contains("after"));
}

TEST_CASE("medq version names both sides", "[e2e]") {
  DaemonProcess d;
  ProcessResult r = RunMedq(d.socket(), {"version"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("medq ") && Catch::Contains("protocol v1") &&
                        Catch::Contains("LibTorch"));
}

TEST_CASE("several requests in flight on one connection are told apart by id", "[e2e]") {
  DaemonProcess d;
  RawClient c(d.socket());
  REQUIRE(c.Send(R"({"v":1,"id":"a","op":"cleanup-memory"})"
                 "\n"
                 R"({"v":1,"id":"b","op":"version"})"
                 "\n"
                 R"({"v":1,"id":3,"op":"queue"})"
                 "\n"));
  std::set<json> ids;
  for (int i = 0; i < 3; ++i) {
    auto reply = c.Read();
    REQUIRE(reply.has_value());
    CHECK((*reply)["event"] == "result");
    ids.insert((*reply)["id"]);
  }
  CHECK(ids == std::set<json>{"a", "b", 3});
}

TEST_CASE("medq without a daemon prints one line naming the socket and exits 69", "[e2e]") {
  TempDir dir;
  const std::string socket = (dir.path() / "nobody.sock").string();
  ProcessResult r = RunMedq(socket, {"health"});
  CHECK(r.status == 69);
  CHECK(r.out.empty());
  CHECK_THAT(r.err, Catch::Contains(socket) && Catch::Contains("medqd"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("medq finds the socket through MEDQ_SOCKET", "[e2e]") {
  DaemonProcess d;
  ProcessResult r = RunProcess({MedqPath().string(), "version"}, {"MEDQ_SOCKET=" + d.socket()});
  CHECK(r.status == 0);
}

TEST_CASE("medq usage errors exit 64", "[e2e]") {
  CHECK(RunProcess({MedqPath().string(), "no-such-command"}).status == 64);
  CHECK(RunProcess({MedqPath().string()}).status == 64);
  CHECK(RunProcess({MedqPath().string(), "--help"}).status == 0);
}

}  // namespace medq::test
