// The durable job store, end to end: submit/status/result/forget, jobs that
// survive SIGKILL and SIGTERM and run again in their order with the output of
// their solo runs, a write killed before its commit, damaged and newer stores
// moved aside, one store per daemon, private files, deleted rows that do not
// linger, and results that expire.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/skip.h"
#include "tests/support/small_filesystem.h"

namespace medq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// A job's result, waiting for it.
json AwaitResult(const std::string& socket, const std::string& job) {
  // Generous: under ThreadSanitizer a replayed blocker takes minutes.
  json reply = CallOp(socket, "result", {{"job", job}, {"wait", true}}, 600s);
  REQUIRE(reply["event"] == "result");
  return reply["result"];
}

std::string Submit(const std::string& socket, const json& generate_params) {
  json reply = CallOp(socket, "submit", {{"op", "generate"}, {"params", generate_params}});
  INFO(reply.dump());
  REQUIRE(reply["event"] == "result");
  REQUIRE(reply["result"]["state"] == "queued");
  return reply["result"]["job"];
}

// Greedy on tiny-llama: its text depends on the prompt alone.
json Greedy(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"mode", "raw"}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// A long generation on tiny-llama3 (its 128k-token vocabulary makes each
// step slow): something to hold the generation slot while others wait.
json Blocker() {
  return {{"model", "tiny-llama3"},
          {"prompt_ids", {128000, 1000, 1001}},
          {"max_tokens", 4000},
          {"temperature", 0}};
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The daemon's args with a job store in `state`.
std::vector<std::string> DurableArgs(const ModelRepo& repo, const fs::path& state,
                                     std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"--state-dir", state.string()});
  return DaemonArgs(repo, std::move(extra));
}

TEST_CASE("durable: submit returns at once, and result gives what generate streams", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess d(DurableArgs(repo, state.path()));
  const ProcessResult submitted =
      RunMedq(d.socket(), {"submit", "--raw", "--max-tokens", "12", "--temperature", "0", "Hello"});
  REQUIRE(submitted.status == 0);
  const std::string job = submitted.out.substr(0, submitted.out.find('\n'));
  REQUIRE(job.rfind('j', 0) == 0);

  const ProcessResult result = RunMedq(d.socket(), {"result", "--wait", job});
  REQUIRE(result.status == 0);
  const ProcessResult streamed = RunMedq(
      d.socket(), {"generate", "--raw", "--max-tokens", "12", "--temperature", "0", "Hello"});
  REQUIRE(streamed.status == 0);
  CHECK(result.out == streamed.out);
  CHECK(!result.out.empty());

  const ProcessResult status = RunMedq(d.socket(), {"status", job});
  CHECK(status.status == 0);
  CHECK_THAT(status.out, Catch::Contains("done"));

  // health shows counts, never contents.
  const json health = CallOp(d.socket(), "health", json::object());
  CHECK(health["result"]["store"]["enabled"] == true);
  CHECK(health["result"]["store"]["done"].get<int>() >= 2);  // submit and the generate
  CHECK(health["result"].dump().find("Hello") == std::string::npos);
  const std::string metrics = CallOp(d.socket(), "metrics", json::object())["result"]["text"];
  CHECK_THAT(metrics, Catch::Contains("medq_store_jobs{state=\"done\"}"));
  CHECK_THAT(metrics, Catch::Contains("medq_store_bytes"));

  CHECK(RunMedq(d.socket(), {"forget", job}).status == 0);
  const ProcessResult gone = RunMedq(d.socket(), {"status", job});
  CHECK(gone.status == kExitDataErr);  // INVALID_REQUEST: no such job
  CHECK_THAT(gone.err, Catch::Contains("INVALID_REQUEST"));
}

TEST_CASE("durable: the job ops name a wrong field", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess d(DurableArgs(repo, state.path()));
  struct Case {
    json params;
    std::string op, names;
  };
  const Case cases[] = {
      {{{"job", 5}}, "status", "params.job"},
      {{{"job", "j1"}, {"wait", "yes"}}, "result", "params.wait"},
      {{{"job", "nope"}}, "forget", "nope"},
      {{{"op", "load"}, {"params", json::object()}}, "submit", "params.op"},
      {{{"op", "generate"}, {"params", 3}}, "submit", "params.params"},
      {{{"op", "generate"}, {"params", {{"prompt", "x"}, {"max_tokens", "many"}}}},
       "submit",
       "max_tokens"},
  };
  for (const Case& c : cases) {
    INFO(c.op << " " << c.params.dump());
    const json reply = CallOp(d.socket(), c.op, c.params);
    CHECK(reply["event"] == "error");
    CHECK(reply["code"] == "INVALID_REQUEST");
    CHECK_THAT(reply["message"].get<std::string>(), Catch::Contains(c.names));
  }
}

TEST_CASE("durable: accepted jobs survive SIGKILL and run again in priority order", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  const std::vector<std::string> prompts = {"low one", "high one", "normal one", "high two"};
  const std::vector<std::string> priorities = {"low", "high", "normal", "high"};
  std::string blocker;
  std::vector<std::string> jobs;
  {
    DaemonProcess d(DurableArgs(repo, state.path(), {"--max-queue", "10"}));
    blocker = Submit(d.socket(), Blocker());
    AwaitQueue(d.socket(), 1, 0);
    for (size_t i = 0; i < prompts.size(); ++i) {
      json params = Greedy(prompts[i], 10);
      params["priority"] = priorities[i];
      jobs.push_back(Submit(d.socket(), params));
    }
    AwaitQueue(d.socket(), 1, prompts.size());
    d.Signal(SIGKILL);
    REQUIRE(d.Wait(10s) == 128 + SIGKILL);
  }
  DaemonProcess d(DurableArgs(repo, state.path(), {"--max-queue", "10"}));
  CHECK_THAT(d.Log(), Catch::Contains("5 accepted job(s) run again"));
  std::map<std::string, double> finished;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const json result = AwaitResult(d.socket(), jobs[i]);
    INFO(result.dump());
    REQUIRE(result["state"] == "done");
    // The same text as the same request run alone, now.
    const Run solo = Generate(d.socket(), Greedy(prompts[i], 10));
    CHECK(result["result"]["text"] == solo.Text());
    finished[jobs[i]] = CallOp(d.socket(), "status", {{"job", jobs[i]}})["result"]["finished_at"];
  }
  CHECK(AwaitResult(d.socket(), blocker)["state"] == "done");
  const double blocker_done =
      CallOp(d.socket(), "status", {{"job", blocker}})["result"]["finished_at"];
  // Replayed in priority order, then by id: high one, high two, the blocker
  // and normal one (normal), low one.
  CHECK(finished[jobs[1]] < finished[jobs[3]]);
  CHECK(finished[jobs[3]] < blocker_done);
  CHECK(blocker_done < finished[jobs[2]]);
  CHECK(finished[jobs[2]] < finished[jobs[0]]);
  // Ids go on past the store's: a new job never reuses one.
  const std::string next = Submit(d.socket(), Greedy("after", 2));
  for (const std::string& j : jobs)
    CHECK(next != j);
}

TEST_CASE("durable: finished results and cancellations survive a restart", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  std::string done_job, cancelled_job;
  json done_result;
  {
    DaemonProcess d(DurableArgs(repo, state.path()));
    done_job = Submit(d.socket(), Greedy("kept", 8));
    done_result = AwaitResult(d.socket(), done_job);
    REQUIRE(done_result["state"] == "done");
    const std::string blocker = Submit(d.socket(), Blocker());
    AwaitQueue(d.socket(), 1, 0);
    cancelled_job = Submit(d.socket(), Greedy("never", 8));
    CHECK(CallOp(d.socket(), "cancel", {{"job", cancelled_job}})["event"] == "result");
    const json cancelled = AwaitResult(d.socket(), cancelled_job);
    CHECK(cancelled["state"] == "cancelled");
    CHECK(cancelled["error"]["code"] == "CANCELLED");
    CHECK(CallOp(d.socket(), "forget", {{"job", blocker}})["result"]["forgotten"] == true);
    d.Signal(SIGKILL);
    d.Wait(10s);
  }
  DaemonProcess d(DurableArgs(repo, state.path()));
  CHECK(AwaitResult(d.socket(), done_job) == done_result);
  CHECK(AwaitResult(d.socket(), cancelled_job)["state"] == "cancelled");
  const json health = CallOp(d.socket(), "health", json::object());
  CHECK(health["result"]["store"]["queued"] == 0);  // nothing ran again
}

TEST_CASE("durable: SIGTERM leaves waiting jobs queued to run after the restart", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  std::string waiting;
  {
    DaemonProcess d(DurableArgs(repo, state.path(), {"--drain-timeout-s", "0.5"}));
    Submit(d.socket(), Blocker());
    AwaitQueue(d.socket(), 1, 0);
    waiting = Submit(d.socket(), Greedy("after the restart", 6));
    d.Signal(SIGTERM);
    REQUIRE(d.Wait(30s) == 0);
  }
  DaemonProcess d(DurableArgs(repo, state.path()));
  const json result = AwaitResult(d.socket(), waiting);
  CHECK(result["state"] == "done");
  CHECK(result["result"]["text"] == Generate(d.socket(), Greedy("after the restart", 6)).Text());
}

TEST_CASE("durable: a write killed before its commit leaves no job", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  std::string before;
  {
    DaemonProcess d(DurableArgs(repo, state.path(), {"--test-fault-injection"}));
    before = Submit(d.socket(), Greedy("one", 4));
    REQUIRE(AwaitResult(d.socket(), before)["state"] == "done");
    REQUIRE(CallOp(d.socket(), "inject-fault", {{"at", "store-write"}})["event"] == "result");
    auto client = ipc::Client::Connect(d.socket());
    REQUIRE(client.ok());
    // The daemon dies writing the job: no reply, no job id.
    auto reply = client->Call("submit", {{"op", "generate"}, {"params", Greedy("two", 4)}}, 20s);
    CHECK(!reply.ok());
    CHECK(d.Wait(10s) == 128 + SIGKILL);
  }
  DaemonProcess d(DurableArgs(repo, state.path()));
  const json store = CallOp(d.socket(), "health", json::object())["result"]["store"];
  CHECK(store["done"] == 1);
  CHECK(store["queued"] == 0);
  CHECK(AwaitResult(d.socket(), before)["state"] == "done");
}

TEST_CASE("durable: a damaged or newer store is moved aside, never read", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  SECTION("damaged") {
    std::ofstream(state.path() / "jobs.db") << std::string(8192, 'x');
  }
  SECTION("newer") {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((state.path() / "jobs.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE jobs (x); PRAGMA user_version = 99", nullptr, nullptr,
                         nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  DaemonProcess d(DurableArgs(repo, state.path()));
  const json health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["status"] == "degraded");
  CHECK_THAT(health["warnings"].dump(), Catch::Contains("moved aside"));
  int aside = 0;
  for (const auto& entry : fs::directory_iterator(state.path())) {
    if (entry.path().filename().string().rfind("jobs.db.", 0) == 0 &&
        entry.path().filename().string().find("-wal") == std::string::npos &&
        entry.path().filename().string().find("-shm") == std::string::npos) {
      ++aside;
    }
  }
  CHECK(aside == 1);
  // The new store works.
  CHECK(AwaitResult(d.socket(), Submit(d.socket(), Greedy("fresh", 3)))["state"] == "done");
}

TEST_CASE("durable: one store serves one daemon", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess first(DurableArgs(repo, state.path()));
  const ProcessResult second =
      RunProcess({MedqdPath().string(), "--config", "/dev/null", "--socket",
                  (state.path() / "second.sock").string(), "--state-dir", state.path().string()});
  CHECK(second.status == 69);
  CHECK_THAT(second.err, Catch::Contains("in use by another medqd"));
  CHECK(CallOp(first.socket(), "health", json::object())["event"] == "result");
}

TEST_CASE("durable: the store is private and forgotten jobs do not linger", "[e2e]") {
  ModelRepo repo;
  TempDir parent;
  const fs::path state = parent.path() / "state";  // made by the daemon
  DaemonProcess d(DurableArgs(repo, state));
  const std::string secret = "patient Zebulon Quixote-Marchetti";
  const std::string job = Submit(d.socket(), Greedy(secret, 4));
  REQUIRE(AwaitResult(d.socket(), job)["state"] == "done");
  struct stat st {};
  REQUIRE(stat(state.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  REQUIRE(stat((state / "jobs.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto on_disk = [&] {
    std::string bytes;
    for (const char* f : {"jobs.db", "jobs.db-wal"})
      bytes += ReadAll(state / f);
    return bytes;
  };
  CHECK(on_disk().find(secret) != std::string::npos);  // recorded...
  REQUIRE(CallOp(d.socket(), "forget", {{"job", job}})["event"] == "result");
  CHECK(on_disk().find(secret) == std::string::npos);   // ...and gone for good
  CHECK(d.Log().find("Zebulon") == std::string::npos);  // never in the log
}

TEST_CASE("durable: results expire after result_ttl_s", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess d(DurableArgs(repo, state.path(), {"--result-ttl-s", "1"}));
  const std::string job = Submit(d.socket(), Greedy("short-lived", 3));
  REQUIRE(AwaitResult(d.socket(), job)["state"] == "done");
  json reply;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(100ms);
    reply = CallOp(d.socket(), "status", {{"job", job}});
    if (reply["event"] == "error") break;
  }
  CHECK(reply["event"] == "error");
  CHECK(reply["code"] == "INVALID_REQUEST");
}

TEST_CASE("durable: a full disk refuses new jobs while the running one finishes", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  SmallFilesystem tiny(state.path(), "256k");
  if (!tiny.ok()) MEDQ_SKIP("cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)");
  DaemonProcess d(DurableArgs(repo, state.path(), {"--max-queue", "1000"}));
  RawClient running(d.socket());
  json blocker = Blocker();
  blocker["max_tokens"] = 200;
  SendGenerate(running, "b", blocker);
  AwaitQueue(d.socket(), 1, 0);
  // Jobs with 40 KB prompts fill the 256 KB store until it refuses one.
  json refused;
  for (int i = 0; i < 40 && refused.is_null(); ++i) {
    json params = Greedy(std::string(40000, 'a' + i % 26), 1);
    const json reply = CallOp(d.socket(), "submit", {{"op", "generate"}, {"params", params}});
    if (reply["event"] == "error") refused = reply;
  }
  INFO(refused.dump());
  REQUIRE(!refused.is_null());
  CHECK(refused["code"] == "NOT_READY");
  CHECK_THAT(refused["message"].get<std::string>(), Catch::Contains("disk is full"));
  CHECK(refused.contains("retry_after_s"));
  // The running generation still ends with its reply, and the daemon serves.
  const Run run = Collect(running, "b", 120s);
  CHECK(run.final()["event"] == "done");
  CHECK(CallOp(d.socket(), "health", json::object())["event"] == "result");
}

TEST_CASE("durable: without a store, submit and the job ops say so", "[e2e]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--state-dir", "none"}));
  const json submitted =
      CallOp(d.socket(), "submit", {{"op", "generate"}, {"params", Greedy("x", 2)}});
  CHECK(submitted["code"] == "NOT_READY");
  CHECK(CallOp(d.socket(), "status", {{"job", "j1"}})["code"] == "NOT_READY");
  // Streaming generation works as before.
  CHECK(Generate(d.socket(), Greedy("x", 2)).final()["event"] == "done");
}

}  // namespace
}  // namespace medq::test
