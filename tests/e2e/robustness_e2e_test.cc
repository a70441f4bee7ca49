// Bad input never crashes or wedges the daemon, and never disturbs other
// clients.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"

namespace medq::test {

using nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("malformed requests get INVALID_REQUEST and the connection stays usable", "[e2e]") {
  DaemonProcess d;
  RawClient c(d.socket());
  struct Case {
    std::string line;
    std::string code;
    json id;
  };
  const Case cases[] = {
      {"{not json", "INVALID_REQUEST", nullptr},
      {"\xff\xfe\xfd", "INVALID_REQUEST", nullptr},
      {R"({"v":1,"id":1,"op":"health","s":")"
       "\xc3\x28"
       R"("})",
       "INVALID_REQUEST", nullptr},
      {"[]", "INVALID_REQUEST", nullptr},
      {"42", "INVALID_REQUEST", nullptr},
      {"", "INVALID_REQUEST", nullptr},
      {R"({"v":1,"op":"health"})", "INVALID_REQUEST", nullptr},
      {R"({"v":1,"id":[1],"op":"health"})", "INVALID_REQUEST", nullptr},
      // Ids JSON can write but the daemon cannot echo exactly.
      {R"({"v":1,"id":1e999,"op":"health"})", "INVALID_REQUEST", nullptr},
      {R"({"v":1,"id":18446744073709551616,"op":"health"})", "INVALID_REQUEST", nullptr},
      {R"({"v":1,"id":1.5,"op":"health"})", "INVALID_REQUEST", nullptr},
      {R"({"id":2,"op":"health"})", "INVALID_REQUEST", 2},
      {R"({"v":"one","id":3,"op":"health"})", "INVALID_REQUEST", 3},
      {R"({"v":1,"id":4})", "INVALID_REQUEST", 4},
      {R"({"v":1,"id":5,"op":["health"]})", "INVALID_REQUEST", 5},
      {R"({"v":1,"id":6,"op":"health","params":"x"})", "INVALID_REQUEST", 6},
      {R"({"v":1,"id":7,"op":"health","params":{"verbose":true}})", "INVALID_REQUEST", 7},
      {R"({"v":9,"id":8,"op":"health"})", "UNSUPPORTED_VERSION", 8},
      {R"({"v":1,"id":9,"op":"make-coffee"})", "UNKNOWN_OP", 9},
      // A mistyped field is the client's error naming it, never INTERNAL.
      {R"({"v":1,"id":11,"op":"load","params":{"model":7}})", "INVALID_REQUEST", 11},
      {R"({"v":1,"id":12,"op":"unload","params":{"model":[]}})", "INVALID_REQUEST", 12},
      {R"({"v":1,"id":13,"op":"tokenize","params":{"model":{},"text":"x"}})", "INVALID_REQUEST",
       13},
      {R"({"v":1,"id":14,"op":"tokenize","params":{"text":"x","add_special_tokens":1}})",
       "INVALID_REQUEST", 14},
      {R"({"v":1,"id":15,"op":"detokenize","params":{"model":1,"ids":[1]}})", "INVALID_REQUEST",
       15},
      {R"({"v":1,"id":16,"op":"detokenize","params":{"ids":[1],"skip_special_tokens":"y"}})",
       "INVALID_REQUEST", 16},
      {R"({"v":1,"id":17,"op":"apply-template","params":{"model":false,"messages":[{"role":"user"}]}})",
       "INVALID_REQUEST", 17},
      {R"({"v":1,"id":18,"op":"apply-template","params":{"messages":[{"role":"user"}],"add_generation_prompt":0}})",
       "INVALID_REQUEST", 18},
      {R"({"v":1,"id":19,"op":"generate","params":{"prompt":"x","model":3}})", "INVALID_REQUEST",
       19},
  };
  for (const Case& k : cases) {
    CAPTURE(k.line);
    json reply = c.Roundtrip(k.line + "\n");
    CHECK(reply["event"] == "error");
    CHECK(reply["code"] == k.code);
    CHECK(reply["id"] == k.id);
    CHECK_FALSE(reply["message"].get<std::string>().empty());
    if (k.line.find("\"model\":") != std::string::npos) {
      CHECK_THAT(reply["message"].get<std::string>(), Catch::Contains("params.model"));
    }
  }
  // Unknown top-level fields are ignored.
  json ok = c.Roundtrip(R"({"v":1,"id":10,"op":"version","client":"test"})"
                        "\n");
  CHECK(ok["event"] == "result");
  RequireHealthy(d.socket());
}

TEST_CASE("a line over the maximum gets TOO_LARGE and its connection is closed", "[e2e]") {
  DaemonProcess d({"--max-message-bytes", "4096"});
  RawClient other(d.socket());
  RawClient big(d.socket());
  std::string line = R"({"v":1,"id":1,"op":"health","pad":")" + std::string(10000, 'x') + "\"}\n";
  big.Send(line);
  auto reply = big.Read();
  REQUIRE(reply.has_value());
  CHECK((*reply)["code"] == "TOO_LARGE");
  CHECK(big.WaitClosed(5s));
  // A line just under the limit is fine, and other clients never noticed.
  std::string fits = R"({"v":1,"id":2,"op":"version","pad":")" + std::string(3900, 'y') + "\"}\n";
  CHECK(other.Roundtrip(fits)["event"] == "result");
  RequireHealthy(d.socket());
}

TEST_CASE("a client that stalls in the middle of a line is timed out", "[e2e]") {
  DaemonProcess d({"--idle-timeout-s", "0.5"});
  RawClient stalled(d.socket());
  REQUIRE(stalled.Send(R"({"v":1,"id":1,"op":"hea)"));
  CHECK(stalled.WaitClosed(5s));
  RequireHealthy(d.socket());
}

TEST_CASE("replies a slow reader has not read yet are kept while it reads within the timeout",
          "[e2e]") {
  DaemonProcess d({"--idle-timeout-s", "1"});
  RawClient c(d.socket());
  // Three generations of token events, more than the socket buffer holds:
  // the rest wait in the daemon's write queue while the client sleeps. A
  // client that reads none of them for the idle timeout is closed
  // (socket_hostile_e2e_test.cc); one that begins within it gets them all.
  for (int id = 1; id <= 3; ++id) {
    REQUIRE(c.Send(R"({"v":1,"id":)" + std::to_string(id) +
                   R"(,"op":"generate","params":{"prompt":"Hello","max_tokens":200,)"
                   R"("return_ids":true,"stop":[]}})"
                   "\n"));
  }
  std::this_thread::sleep_for(700ms);
  int done = 0;
  int tokens = 0;
  while (done < 3) {
    auto reply = c.Read(10s);
    REQUIRE(reply.has_value());  // not closed with replies still owed
    if ((*reply)["event"] == "token") ++tokens;
    if ((*reply)["event"] == "done") ++done;
    REQUIRE((*reply)["event"] != "error");
  }
  CHECK(tokens > 100);
  // Once everything is read, silence closes it as before.
  CHECK(c.WaitClosed(5s));
}

TEST_CASE("clients that connect and vanish leave the daemon serving", "[e2e]") {
  DaemonProcess d;
  for (int i = 0; i < 200; ++i) {
    RawClient c(d.socket());
    if (i % 3 == 0)
      c.Send(R"({"v":1,"id":1,"op":"cleanup-memory"})"
             "\n");                                         // reply unread
    if (i % 3 == 1) c.Send(R"({"v":1,"id":1,"op":"heal)");  // half a line
  }
  RequireHealthy(d.socket());
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto h = client->Call("health", {}, 5s);
  REQUIRE(h.ok());
  CHECK((*h)["result"]["connections"].get<int>() <= 2);
}

TEST_CASE("connections past the limit are refused clearly", "[e2e]") {
  DaemonProcess d({"--max-connections", "20"});
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 19; ++i) {  // the 20th slot is the probe below
    held.push_back(std::make_unique<RawClient>(d.socket()));
    REQUIRE(held.back()->Roundtrip(R"({"v":1,"id":1,"op":"version"})"
                                   "\n")["event"] == "result");
  }
  RawClient last(d.socket());
  REQUIRE(last.Roundtrip(R"({"v":1,"id":1,"op":"version"})"
                         "\n")["event"] == "result");
  RawClient refused(d.socket());
  auto reply = refused.Read(5s);
  REQUIRE(reply.has_value());
  CHECK((*reply)["code"] == "NOT_READY");
  CHECK_THAT((*reply)["message"].get<std::string>(), Catch::Contains("Too many connections"));
  CHECK(reply->contains("retry_after_s"));
  CHECK(refused.WaitClosed(5s));
  held.clear();  // room again
  std::this_thread::sleep_for(200ms);
  RequireHealthy(d.socket());
}

TEST_CASE("hundreds of concurrent clients are all served", "[e2e]") {
  DaemonProcess d;
  constexpr int kClients = 32;
  constexpr int kCalls = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      auto client = ipc::Client::Connect(d.socket());
      if (!client.ok()) return;
      for (int i = 0; i < kCalls; ++i) {
        auto r = client->Call(i % 2 ? "health" : "queue", {}, 10s);
        if (r.ok() && (*r)["event"] == "result") ++ok;
      }
    });
  }
  // Plus 300 short-lived connections at the same time.
  std::vector<std::thread> bursts;
  std::atomic<int> burst_ok{0};
  for (int t = 0; t < 4; ++t) {
    bursts.emplace_back([&] {
      for (int i = 0; i < 75; ++i) {
        auto client = ipc::Client::Connect(d.socket());
        if (client.ok() && client->Call("version", {}, 10s).ok()) ++burst_ok;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (auto& th : bursts)
    th.join();
  CHECK(ok == kClients * kCalls);
  CHECK(burst_ok == 300);
  RequireHealthy(d.socket());
}

TEST_CASE("a completion that throws is answered INTERNAL and the daemon goes on", "[e2e]") {
  DaemonProcess d({"--test-fault-injection"});
  RawClient c(d.socket());
  // cleanup-memory's completion, then a model-class op's (tokenize on the
  // built-in demo model): each throws once, on the loop thread.
  const std::string ops[] = {R"("op":"cleanup-memory")",
                             R"("op":"tokenize","params":{"text":"Hello there"})"};
  int id = 0;
  for (const std::string& op : ops) {
    CAPTURE(op);
    json armed = c.Roundtrip(R"({"v":1,"id":)" + std::to_string(++id) +
                             R"(,"op":"inject-fault","params":{"at":"completion"}})"
                             "\n");
    REQUIRE(armed["event"] == "result");
    CHECK(armed["result"]["armed"] == "completion");
    const int failing = ++id;
    json failed = c.Roundtrip(R"({"v":1,"id":)" + std::to_string(failing) + "," + op + "}\n");
    INFO("the failing request's reply: " << failed.dump());
    CHECK(failed["id"] == failing);
    CHECK(failed["event"] == "error");
    CHECK(failed["code"] == "INTERNAL");
    // Exactly one final reply: the next line answers the next request.
    json health = c.Roundtrip(R"({"v":1,"id":)" + std::to_string(++id) +
                              R"(,"op":"health"})"
                              "\n");
    INFO("the next reply: " << health.dump() << "\nlog:\n" << d.Log());
    CHECK(health["id"] == id);
    CHECK(health["event"] == "result");
    // The fault was one-shot: the same op succeeds now.
    json again = c.Roundtrip(R"({"v":1,"id":)" + std::to_string(++id) + "," + op + "}\n");
    CHECK(again["id"] == id);
    CHECK(again["event"] == "result");
  }
  CHECK_THAT(d.Log(), Catch::Contains("injected fault: the completion of tokenize threw"));
  RequireHealthy(d.socket());
}

}  // namespace medq::test
