// The defects a hostile client found, each reproduced against a real daemon:
// a deeply nested request, a trickled line, more connections than
// descriptors, a huge tokenize, and a last line cut short by a half-close.
#include <catch2/catch.hpp>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/skip.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::vector<std::string> HostileArgs(const ModelRepo& repo, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--models-dir", repo.dir().string(), "--model",
                                   "tiny-llama3",  "--threads",         "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Reads the events of request `id` up to its final one.
json FinalReply(RawClient& c, const json& id) {
  for (;;) {
    auto e = c.Read(60s);
    REQUIRE(e.has_value());
    if ((*e)["id"] != id) continue;
    const std::string event = (*e)["event"];
    if (event == "done" || event == "result" || event == "error") return *e;
  }
}

json Tokenize(const std::string& socket, const std::string& text) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  auto reply = client->Call("tokenize", {{"text", text}}, 120s);
  REQUIRE(reply.ok());
  return *reply;
}

int64_t Rss(const std::string& socket) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  auto h = client->Call("health", {}, 10s);
  REQUIRE(h.ok());
  return (*h)["result"]["memory"]["rss_bytes"].get<int64_t>();
}

}  // namespace

TEST_CASE("a request nested 100,000 levels deep is refused, and the daemon lives on", "[e2e]") {
  DaemonProcess d;
  RawClient c(d.socket());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string shapes[] = {
      R"({"v":1,"id":1,"op":"generate","params":{"prompt":"hi","max_tokens":2,"template_kwargs":{"k":)" +
          deep + "}}}",
      R"({"v":1,"id":1,"op":"generate","params":{"prompt":"hi","max_tokens":2,"tools":)" + deep +
          "}}",
      R"({"v":1,"id":1,"op":"generate","params":{"messages":[{"role":"user","content":)" + deep +
          "}]}}",
      R"({"v":1,"id":1,"op":"apply-template","params":{"messages":[{"role":"user","content":"x"}],"template_kwargs":{"k":)" +
          deep + "}}}",
  };
  for (const std::string& line : shapes) {
    json reply = c.Roundtrip(line + "\n");
    CHECK(reply["event"] == "error");
    CHECK(reply["code"] == "INVALID_REQUEST");
    CHECK(reply["id"] == 1);
    CHECK_THAT(reply["message"].get<std::string>(), Catch::Contains("64 levels"));
  }
  RequireHealthy(d.socket());
}

TEST_CASE("a client trickling one byte at a time is closed by the idle timeout", "[e2e]") {
  DaemonProcess d({"--idle-timeout-s", "1"});
  RawClient trickler(d.socket());
  const std::string line = R"({"v":1,"id":1,"op":"health","params":{}})";
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; !trickler.closed() && std::chrono::steady_clock::now() - start < 6s; ++i) {
    trickler.Send(line.substr(i % line.size(), 1));  // never the newline
    trickler.Read(200ms);                            // notices the close
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(trickler.closed());
  CHECK(took < 3s);  // one idle timeout and a little, not "never"
  CHECK_THAT(d.Log(), Catch::Contains("without completing a line"));
  RequireHealthy(d.socket());
}

TEST_CASE("max_connections above the open-file limit is lowered to what fits", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(HostileArgs(repo, {"--max-connections", "1000"}), 30s, true,
                  /*open_file_limit=*/128);
  CHECK_THAT(d.Log(), Catch::Contains("serving at most 64 connections"));
  std::vector<std::unique_ptr<RawClient>> served;
  int refused = 0;
  int silent = 0;
  for (int i = 0; i < 150; ++i) {
    auto c = std::make_unique<RawClient>(d.socket());
    c->Send(R"({"v":1,"id":1,"op":"version"})"
            "\n");
    auto reply = c->Read(10s);
    if (!reply) {
      ++silent;  // EOF or nothing: the defect
    } else if ((*reply)["event"] == "result") {
      served.push_back(std::move(c));
    } else {
      CHECK((*reply)["code"] == "NOT_READY");
      CHECK(reply->contains("retry_after_s"));
      ++refused;
    }
  }
  INFO(d.Log());
  CHECK(silent == 0);
  CHECK(served.size() == 64);
  CHECK(refused == 150 - 64);
  // With every allowed connection held, a generation still opens the model's
  // files: the descriptors it needs were kept aside.
  REQUIRE_FALSE(served.empty());
  served.front()->Send(
      R"({"v":1,"id":2,"op":"generate","params":{"prompt":"Hello","max_tokens":3,"mode":"raw"}})"
      "\n");
  json done = FinalReply(*served.front(), 2);
  CHECK(done["event"] == "done");
}

TEST_CASE("tokenize refuses text over its limit and frees what a large one used", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(HostileArgs(repo));
  REQUIRE(Tokenize(d.socket(), "warm up")["event"] == "result");
  json huge = Tokenize(d.socket(), std::string(4u << 20, 'a'));
  CHECK(huge["event"] == "error");
  CHECK(huge["code"] == "INVALID_REQUEST");
  CHECK_THAT(huge["message"].get<std::string>(), Catch::Contains("1048576"));
}

TEST_CASE("the memory of a large tokenize is given back after the job", "[e2e]") {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator keeps freed memory in quarantine: RSS says nothing here.
  MEDQ_SKIP("RSS is not a measure of freed memory under AddressSanitizer");
#elif defined(__SANITIZE_THREAD__)
  // So does TSan's allocator, which gives freed memory back to the system lazily.
  MEDQ_SKIP("RSS is not a measure of freed memory under ThreadSanitizer");
#endif
  ModelRepo repo;
  DaemonProcess d(HostileArgs(repo));
  REQUIRE(Tokenize(d.socket(), "warm up")["event"] == "result");
  std::string words;
  for (int i = 0; words.size() < (1u << 20) - 16; ++i)
    words += "word" + std::to_string(i % 5000) + " ";
  const int64_t before = Rss(d.socket());
  {
    json big = Tokenize(d.socket(), words);
    REQUIRE(big["event"] == "result");
    CHECK(big["result"]["ids"].size() > 100000);
  }
  // The trim runs on the worker just after the job: give it a moment.
  int64_t after = Rss(d.socket());
  for (int i = 0; i < 50 && after - before >= (64 << 20); ++i) {
    std::this_thread::sleep_for(100ms);
    after = Rss(d.socket());
  }
  CAPTURE(before, after);
  CHECK(after - before < (64 << 20));
}

TEST_CASE("a last line without its newline is answered before a half-close", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(HostileArgs(repo));
  {
    RawClient c(d.socket());
    REQUIRE(c.Send(R"({"v":1,"id":5,"op":"version"})"));  // no newline
    c.ShutdownWrite();
    auto reply = c.Read(10s);
    REQUIRE(reply.has_value());
    CHECK((*reply)["id"] == 5);
    CHECK((*reply)["event"] == "result");
    CHECK(c.WaitClosed(5s));
  }
  {
    // A streaming request sent whole, then a half-close: every event arrives.
    RawClient c(d.socket());
    REQUIRE(c.Send(
        R"({"v":1,"id":6,"op":"generate","params":{"prompt":"Hello","max_tokens":4,"mode":"raw"}})"
        "\n"));
    c.ShutdownWrite();
    json done = FinalReply(c, 6);
    CHECK(done["event"] == "done");
    CHECK(done["usage"]["completion_tokens"].get<int>() >= 1);
    CHECK(c.WaitClosed(5s));
  }
  RequireHealthy(d.socket());
}

}  // namespace medq::test
