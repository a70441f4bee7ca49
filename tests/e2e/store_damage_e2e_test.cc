// A damaged job store, end to end: an emptied jobs.db, garbage in its
// write-ahead log, a row that does not decode, and a full disk. Every job
// accepted before the damage either still has its record (and runs or has its
// result) or answers "lost" in its own status; health says what happened; ids
// are never given again; a full disk leaves forget and result working and the
// daemon starting.
#include <signal.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

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

std::string SubmitJob(const std::string& socket, const json& params) {
  const json reply = CallOp(socket, "submit", {{"op", "generate"}, {"params", params}});
  INFO(reply.dump());
  REQUIRE(reply["event"] == "result");
  return reply["result"]["job"];
}

json Quick(const std::string& prompt) {
  return {{"prompt", prompt}, {"mode", "raw"}, {"max_tokens", 2}, {"temperature", 0}};
}

// Holds the generation slot for a while, so that the jobs after it wait.
json Holder() {
  return {{"model", "tiny-llama3"},
          {"prompt_ids", {128000, 1000, 1001}},
          {"max_tokens", 600},
          {"temperature", 0}};
}

uint64_t IdNumber(const std::string& job) {
  return std::stoull(job.substr(1));
}

std::vector<std::string> StoreArgs(const ModelRepo& repo, const fs::path& state,
                                   std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"--state-dir", state.string(), "--max-queue", "100"});
  return DaemonArgs(repo, std::move(extra));
}

// Every job accepted before the damage: its record is there (any state but
// "lost" means it runs or has run) or its status says "lost"; never "no job".
// Returns how many were lost.
int RequireAccountedFor(const std::string& socket, const std::vector<std::string>& jobs) {
  int lost = 0;
  for (const std::string& job : jobs) {
    const json status = CallOp(socket, "status", {{"job", job}});
    INFO(job << ": " << status.dump());
    REQUIRE(status["event"] == "result");
    const std::string state = status["result"]["state"];
    if (state == "lost") {
      ++lost;
      CHECK(status["result"]["error"]["code"] == "INTERNAL");
      CHECK(CallOp(socket, "result", {{"job", job}})["result"]["state"] == "lost");
    }
  }
  return lost;
}

size_t FilesStartingWith(const fs::path& dir, const std::string& prefix) {
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir))
    n += entry.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("store damage: an emptied jobs.db loses nothing silently and never reuses an id",
          "[e2e]") {
  ModelRepo repo;
  TempDir state;
  const bool keep_wal = GENERATE(false, true);
  INFO("WAL kept: " << keep_wal);
  std::vector<std::string> jobs;
  {
    DaemonProcess d(StoreArgs(repo, state.path()));
    for (int i = 0; i < 20; ++i)
      jobs.push_back(SubmitJob(d.socket(), Quick("job " + std::to_string(i))));
    CallOp(d.socket(), "result", {{"job", jobs.back()}, {"wait", true}}, 300s);
    d.Signal(SIGKILL);
    REQUIRE(d.Wait(10s) == 128 + SIGKILL);
  }
  fs::resize_file(state.path() / "jobs.db", 0);
  if (!keep_wal) fs::remove(state.path() / "jobs.db-wal");
  DaemonProcess d(StoreArgs(repo, state.path()));
  const int lost = RequireAccountedFor(d.socket(), jobs);
  const json health = CallOp(d.socket(), "health", json::object())["result"];
  INFO(health.dump());
  if (lost > 0) {
    CHECK(health["status"] == "degraded");
    CHECK_THAT(health["warnings"].dump(), Catch::Contains("job store damaged"));
    CHECK(health["store"]["lost"] == lost);
    CHECK(FilesStartingWith(state.path(), "jobs.db.") >= 1);  // kept aside as it was
  }
  if (!keep_wal) CHECK(lost == 20);  // nothing of them survived: all reported
  // A new job never takes an old one's id.
  const std::string next = SubmitJob(d.socket(), Quick("after"));
  for (const std::string& job : jobs)
    CHECK(IdNumber(next) > IdNumber(job));
  // And after another restart, the lost ones still say so.
  d.Signal(SIGTERM);
  REQUIRE(d.Wait(30s) == 0);
  DaemonProcess again(StoreArgs(repo, state.path()));
  CHECK(RequireAccountedFor(again.socket(), jobs) == lost);
}

TEST_CASE("store damage: garbage in the write-ahead log is found, not silently dropped", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  std::vector<std::string> jobs;
  {
    DaemonProcess d(StoreArgs(repo, state.path()));
    jobs.push_back(SubmitJob(d.socket(), Holder()));
    AwaitQueue(d.socket(), 1, 0);
    for (int i = 0; i < 20; ++i)
      jobs.push_back(SubmitJob(d.socket(), Quick("queued " + std::to_string(i))));
    d.Signal(SIGKILL);
    REQUIRE(d.Wait(10s) == 128 + SIGKILL);
  }
  const fs::path wal = state.path() / "jobs.db-wal";
  REQUIRE(fs::exists(wal));
  const auto size = fs::file_size(wal);
  REQUIRE(size > 16384);
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string garbage(4096, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  DaemonProcess d(StoreArgs(repo, state.path()));
  const int lost = RequireAccountedFor(d.socket(), jobs);
  const json health = CallOp(d.socket(), "health", json::object())["result"];
  INFO(health.dump());
  CHECK(lost > 0);
  CHECK(health["status"] == "degraded");
  CHECK_THAT(health["warnings"].dump(), Catch::Contains("write-ahead log"));
  CHECK(health["store"]["lost"] == lost);
  CHECK(FilesStartingWith(state.path(), "jobs.db.lost-") >= 1);
  const std::string next = SubmitJob(d.socket(), Quick("after"));
  for (const std::string& job : jobs)
    CHECK(IdNumber(next) > IdNumber(job));
  // The jobs that survived run to their end.
  for (const std::string& job : jobs) {
    const json r = CallOp(d.socket(), "result", {{"job", job}, {"wait", true}}, 300s)["result"];
    CHECK((r["state"] == "done" || r["state"] == "lost"));
  }
}

TEST_CASE("store damage: a row that does not decode is reported and can be forgotten", "[e2e]") {
  ModelRepo repo;
  TempDir state;
  DaemonProcess d(StoreArgs(repo, state.path()));
  const std::string job = SubmitJob(d.socket(), Quick("to damage"));
  REQUIRE(CallOp(d.socket(), "result", {{"job", job}, {"wait", true}}, 300s)["result"]["state"] ==
          "done");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open((state.path() / "jobs.db").c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  const std::string sql = "UPDATE jobs SET result='{' WHERE id=" + job.substr(1);
  REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);

  for (const char* op : {"status", "result"}) {
    const json reply = CallOp(d.socket(), op, {{"job", job}});
    INFO(reply.dump());
    REQUIRE(reply["event"] == "result");
    CHECK(reply["result"]["state"] == "damaged");
    CHECK_THAT(reply["result"]["error"]["message"].get<std::string>(),
               Catch::Contains("forget it"));
  }
  json health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["status"] == "degraded");
  CHECK(health["store"]["damaged"] == 1);
  const json forgotten = CallOp(d.socket(), "forget", {{"job", job}});
  INFO(forgotten.dump());
  CHECK(forgotten["result"]["forgotten"] == true);
  CHECK(CallOp(d.socket(), "status", {{"job", job}})["code"] == "INVALID_REQUEST");
  health = CallOp(d.socket(), "health", json::object())["result"];
  CHECK(health["status"] == "ok");
}

TEST_CASE("store damage: a full disk is degraded, forget and result work, and medqd starts",
          "[e2e]") {
  ModelRepo repo;
  TempDir state;
  SmallFilesystem small(state.path(), "512k");
  if (!small.ok()) MEDQ_SKIP("cannot mount a small tmpfs here (needs CAP_SYS_ADMIN)");
  std::vector<std::string> jobs;
  {
    DaemonProcess d(StoreArgs(repo, state.path()));
    // Jobs with 40 KB prompts fill the store until it refuses one.
    json refused;
    for (int i = 0; i < 60 && refused.is_null(); ++i) {
      const json reply =
          CallOp(d.socket(), "submit",
                 {{"op", "generate"}, {"params", Quick(std::string(40000, 'a' + i % 26))}});
      if (reply["event"] == "error") {
        refused = reply;
      } else {
        jobs.push_back(reply["result"]["job"]);
      }
    }
    INFO(refused.dump());
    REQUIRE(!refused.is_null());
    REQUIRE(refused["code"] == "NOT_READY");
    REQUIRE(jobs.size() >= 2);
    json health = CallOp(d.socket(), "health", json::object())["result"];
    CHECK(health["status"] == "degraded");
    CHECK(health["store"]["disk_full"] == true);
    // result works on a full disk.
    const json result = CallOp(d.socket(), "result", {{"job", jobs[0]}});
    CHECK(result["event"] == "result");
    // forget works, and frees room.
    const json forgotten = CallOp(d.socket(), "forget", {{"job", jobs[0]}});
    INFO(forgotten.dump());
    CHECK(forgotten["event"] == "result");
    CHECK(forgotten["result"]["forgotten"] == true);
    d.Signal(SIGKILL);
    REQUIRE(d.Wait(10s) == 128 + SIGKILL);
  }
  // Fill what room is left, then start again.
  {
    std::ofstream filler(state.path() / "filler", std::ios::binary);
    const std::string block(4096, 'f');
    for (int i = 0; i < 1024 && filler.write(block.data(), block.size()); ++i) {
    }
  }
  DaemonProcess d(StoreArgs(repo, state.path()));
  const json health = CallOp(d.socket(), "health", json::object())["result"];
  INFO(health.dump());
  CHECK(health["ready"] == true);
  CHECK(health["status"] == "degraded");
  // Work that needs no record is served.
  const Run run = Generate(d.socket(), Quick("still serving"));
  CHECK(run.final()["event"] != "error");
  fs::remove(state.path() / "filler");
}

}  // namespace medq::test
