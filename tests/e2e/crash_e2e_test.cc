// The crash harness: a real daemon gets a mixed workload (priorities,
// submitted and streaming jobs, cancels, forgets) and is SIGKILLed at random
// moments, some of them inside the job store's writes (inject-fault
// store-write), then restarted on the same store, again and again. At the
// end every accepted job has exactly one result, equal to its solo run; none
// is lost, none has two different results; cancelled and forgotten jobs
// stay so. MEDQ_CRASH_KILLS sets the number of kills (default 100); the
// seed is printed, and MEDQ_CRASH_SEED repeats a run.
//
// The damage run adds, between kills, damage to the store while the daemon
// is down (an emptied jobs.db, garbage in its write-ahead log, a row that
// does not decode) and a full disk for whole lives: then every job accepted
// before the damage either still completes or answers "lost" (or "damaged")
// in its own status, and health counts the lost; none is silently gone, and
// no id is ever given twice. It runs a third of MEDQ_CRASH_KILLS (at least 8).
#include <signal.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/small_filesystem.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::atoi(v) : fallback;
}

// One reply, or nullopt when the daemon died first.
std::optional<json> TryCall(const std::string& socket, const std::string& op, const json& params,
                            std::chrono::milliseconds timeout = 20s) {
  auto client = ipc::Client::Connect(socket);
  if (!client.ok()) return std::nullopt;
  auto reply = client->Call(op, params, timeout);
  if (!reply.ok()) return std::nullopt;
  return *reply;
}

// Whether the daemons run the loop a GPU takes (the devloop leg). There the
// harness runs one job at a time; the release leg batches two. The device
// loop's step on the CPU now gives each row its solo logits bitwise
// (device_loop_test.cc), and with two at a time this harness passed about
// 30 damage runs and failed one, whose output was not kept: until that is
// explained, one at a time.
bool OnDeviceLoop() {
  const char* v = std::getenv("MEDQ_TEST_DEVICE_LOOP_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

// Greedy or seeded runs of tiny-llama: their text depends on the params alone.
json RandomParams(std::mt19937& rng) {
  static const char* kPriorities[] = {"high", "normal", "low"};
  json p = {{"prompt", "job " + std::to_string(rng() % 1000)},
            {"mode", "raw"},
            {"max_tokens", 4 + static_cast<int>(rng() % 40)},
            {"priority", kPriorities[rng() % 3]}};
  if (rng() % 2 == 0) {
    p["temperature"] = 0;
  } else {
    p["temperature"] = 0.8;
    p["seed"] = static_cast<int>(rng() % 100000);
  }
  return p;
}

struct Accepted {
  json params;
  int cycle = 0;             // the daemon's life that accepted it
  bool cancelled = false;    // a cancel of it was answered
  bool forgotten = false;    // a forget of it was answered
  std::optional<json> seen;  // a finished result fetched before a later kill
  int seen_cycle = 0;        // the life it was fetched in
};

class Harness {
 public:
  // `damage`: the damage run (see the top); `full_disk`: the state folder is
  // a small filesystem of its own that some lives find full.
  Harness(const ModelRepo& repo, const std::filesystem::path& state, uint32_t seed,
          bool damage = false, bool full_disk = false)
      : args_(DaemonArgs(
            repo, {"--state-dir", state.string(), "--max-queue", "1000", "--test-fault-injection",
                   "--max-concurrent", OnDeviceLoop() ? "1" : "2"})),
        state_(state),
        rng_(seed),
        damage_(damage),
        full_disk_(full_disk) {}

  // One life of the daemon: a workload, then a kill (by SIGKILL at a random
  // moment, or inside a store write); in the damage run, then damage.
  // The last two lives are left undamaged, so that some jobs must complete.
  void Cycle(int i, int lives) {
    cycle_ = i;
    const bool full = full_disk_ && i % 6 == 5;
    if (full) Fill();
    DaemonProcess d(args_);
    const bool in_write = i % 5 == 4;
    std::thread streamer;
    std::string streamed_job;
    json streamed_params = RandomParams(rng_);
    // A streaming client: accepted once it hears its job id.
    streamer = std::thread([&, socket = d.socket()] {
      RawClient c(socket);
      SendGenerate(c, "s", streamed_params);
      for (;;) {
        auto e = c.Read(20s);
        if (!e) return;
        if (((*e)["event"] == "queued" || (*e)["event"] == "started") && !full) {
          // (On a full disk a stream runs unrecorded: not an accepted job.)
          std::lock_guard lock(mu_);
          streamed_job = (*e)["job"];
          Accept(streamed_job, streamed_params);
        }
        if ((*e)["event"] == "done" || (*e)["event"] == "error") return;
      }
    });
    const int submits = 2 + static_cast<int>(rng_() % 4);
    for (int k = 0; k < submits; ++k)
      Submit(d.socket());
    Poke(d.socket());
    if (in_write) {
      // The next write is a submit's insert: killed before its commit, it
      // must leave no job (its client gets no id).
      REQUIRE(TryCall(d.socket(), "inject-fault", {{"at", "store-write"}}).has_value());
      auto reply =
          TryCall(d.socket(), "submit", {{"op", "generate"}, {"params", RandomParams(rng_)}}, 10s);
      if (reply && (*reply)["event"] == "result") {
        std::lock_guard lock(mu_);
        ++unexpected_;  // the write was killed: nothing may be accepted
      }
      ++kills_in_writes_;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(rng_() % 150));
      d.Signal(SIGKILL);
    }
    const int status = d.Wait(20s);
    CHECK(status == 128 + SIGKILL);
    ++kills_;
    streamer.join();
    if (full) std::filesystem::remove(state_ / "filler");
    if (damage_ && i % 4 == 3 && i < lives - 2) Damage();
  }

  // After the last kill: every accepted job's one result.
  void Check() {
    DaemonProcess d(args_);
    int done = 0, cancelled = 0, forgotten = 0, lost = 0, mismatched = 0;
    int reported_lost = 0, reported_damaged = 0;
    std::map<std::string, std::string> solo;  // params -> text, run alone now
    for (auto& [job, a] : jobs_) {
      INFO(job << " " << a.params.dump());
      const bool damaged_since = a.cycle <= last_damage_;  // a damage came after it
      const bool seen_before_damage = a.seen && a.seen_cycle <= last_damage_;
      if (a.forgotten) {
        auto status = TryCall(d.socket(), "status", {{"job", job}});
        REQUIRE(status.has_value());
        // A forget in commits that damage dropped is undone: the job is back.
        if (!damaged_since) CHECK((*status)["code"] == "INVALID_REQUEST");
        ++forgotten;
        continue;
      }
      auto reply = TryCall(d.socket(), "result", {{"job", job}, {"wait", true}}, 300s);
      REQUIRE(reply.has_value());
      if ((*reply)["event"] != "result") {
        ++lost;  // silently gone: never allowed
        continue;
      }
      const json result = (*reply)["result"];
      if (result["state"] == "lost" || result["state"] == "damaged") {
        CHECK(damaged_since);
        ++(result["state"] == "lost" ? reported_lost : reported_damaged);
        continue;
      }
      // One result, never two; after damage that dropped it, the job ran
      // again: the same text, other timings.
      if (a.seen && !seen_before_damage) CHECK(result == *a.seen);
      if (seen_before_damage && result["state"] == "done" && (*a.seen)["state"] == "done") {
        CHECK(result["result"]["text"] == (*a.seen)["result"]["text"]);
      }
      if (a.cancelled && (result["state"] == "cancelled" || !damaged_since)) {
        CHECK(result["state"] == "cancelled");
        ++cancelled;
        continue;
      }
      REQUIRE(result["state"] == "done");
      const std::string key = a.params.dump();
      if (!solo.count(key)) solo[key] = Generate(d.socket(), a.params).Text();
      if (result["result"]["text"] != solo[key]) ++mismatched;
      ++done;
    }
    std::cout << json{{"crash_harness",
                       {{"kills", kills_},
                        {"kills_in_store_writes", kills_in_writes_},
                        {"jobs_accepted", jobs_.size()},
                        {"done", done},
                        {"cancelled", cancelled},
                        {"forgotten", forgotten},
                        {"lost", lost},
                        {"mismatched", mismatched},
                        {"accepted_after_a_killed_write", unexpected_},
                        {"damages", damages_},
                        {"lives_on_a_full_disk", full_lives_},
                        {"reported_lost", reported_lost},
                        {"reported_damaged", reported_damaged},
                        {"ids_given_twice", reused_}}}}
                     .dump()
              << std::endl;
    CHECK(lost == 0);
    CHECK(mismatched == 0);
    CHECK(unexpected_ == 0);
    CHECK(reused_ == 0);
    CHECK(done > 0);
    if (reported_lost > 0) {
      auto health = TryCall(d.socket(), "health", json::object());
      REQUIRE(health.has_value());
      CHECK((*health)["result"]["store"]["lost"].get<int>() >= reported_lost);
    }
  }

  int damages() const { return damages_; }

  int kills() const { return kills_; }

 private:
  void Submit(const std::string& socket) {
    json params = RandomParams(rng_);
    auto reply = TryCall(socket, "submit", {{"op", "generate"}, {"params", params}});
    if (!reply || (*reply)["event"] != "result") return;
    std::lock_guard lock(mu_);
    Accept((*reply)["result"]["job"], params);
  }

  // Caller holds mu_. An id seen in an earlier life is an id given twice.
  void Accept(const std::string& job, const json& params) {
    auto [it, added] = jobs_.try_emplace(job);
    if (!added && it->second.cycle != cycle_) ++reused_;
    if (!added) return;
    it->second.params = params;
    it->second.cycle = cycle_;
  }

  // The daemon is down: damage its store, one way or another.
  void Damage() {
    namespace fs = std::filesystem;
    const fs::path db = state_ / "jobs.db";
    const fs::path wal = state_ / "jobs.db-wal";
    last_damage_ = cycle_;
    ++damages_;
    std::error_code ec;
    switch (rng_() % 3) {
      case 0:  // emptied, its WAL with it or not
        fs::resize_file(db, 0, ec);
        if (rng_() % 2 == 0) fs::remove(wal, ec);
        break;
      case 1: {  // 4 KiB of garbage somewhere in the WAL
        const auto size = fs::file_size(wal, ec);
        if (ec || size < 8192) break;
        std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(rng_() % (size - 4096)));
        const std::string garbage(4096, static_cast<char>(rng_()));
        f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
        break;
      }
      default: {  // a finished row's result no longer decodes
        sqlite3* h = nullptr;
        if (sqlite3_open(db.c_str(), &h) == SQLITE_OK) {
          sqlite3_busy_timeout(h, 5000);
          sqlite3_exec(h,
                       "UPDATE jobs SET result = '{' WHERE id = (SELECT id FROM jobs WHERE state "
                       "!= 'queued' ORDER BY random() LIMIT 1)",
                       nullptr, nullptr, nullptr);
        }
        sqlite3_close(h);
        break;
      }
    }
  }

  // Fills the state folder's filesystem for one life.
  void Fill() {
    std::ofstream filler(state_ / "filler", std::ios::binary);
    const std::string block(4096, 'f');
    for (int k = 0; k < 4096 && filler.write(block.data(), block.size()); ++k) {
    }
    ++full_lives_;
  }

  // Cancels, forgets and fetches a few known jobs, as clients would.
  void Poke(const std::string& socket) {
    std::vector<std::string> known;
    {
      std::lock_guard lock(mu_);
      for (auto& [job, a] : jobs_) {
        if (!a.forgotten) known.push_back(job);
      }
    }
    if (known.empty()) return;
    for (int k = 0; k < 3; ++k) {
      const std::string& job = known[rng_() % known.size()];
      const int what = static_cast<int>(rng_() % 4);
      if (what == 0) {
        auto r = TryCall(socket, "cancel", {{"job", job}});
        std::lock_guard lock(mu_);
        if (r && (*r)["event"] == "result") jobs_[job].cancelled = true;
      } else if (what == 1 && rng_() % 3 == 0) {
        auto r = TryCall(socket, "forget", {{"job", job}});
        std::lock_guard lock(mu_);
        if (r && (*r)["event"] == "result") jobs_[job].forgotten = true;
      } else {
        auto r = TryCall(socket, "result", {{"job", job}});
        std::lock_guard lock(mu_);
        const auto finished = [](const json& state) {
          return state == "done" || state == "failed" || state == "cancelled" || state == "lost" ||
                 state == "damaged";
        };
        if (r && (*r)["event"] == "result" && finished((*r)["result"]["state"])) {
          // One result, never two, unless damage since took it (it may run
          // again, or be lost, or be lost again with its record of loss).
          Accepted& a = jobs_[job];
          if (a.seen && a.seen_cycle > last_damage_) CHECK(*a.seen == (*r)["result"]);
          a.seen = (*r)["result"];
          a.seen_cycle = cycle_;
        }
      }
    }
  }

  std::vector<std::string> args_;
  std::filesystem::path state_;
  std::mt19937 rng_;
  bool damage_;
  bool full_disk_;
  std::mutex mu_;
  std::map<std::string, Accepted> jobs_;
  int cycle_ = 0;
  int last_damage_ = -1;
  int kills_ = 0;
  int kills_in_writes_ = 0;
  int unexpected_ = 0;
  int reused_ = 0;
  int damages_ = 0;
  int full_lives_ = 0;
};

TEST_CASE("crash: SIGKILL at random moments loses no accepted job", "[e2e][crash]") {
  ModelRepo repo;
  TempDir state;
  const auto seed = static_cast<uint32_t>(EnvInt("MEDQ_CRASH_SEED", std::random_device{}()));
  const int kills = EnvInt("MEDQ_CRASH_KILLS", 100);
  std::cout << "crash harness: seed " << seed << ", " << kills << " kills" << std::endl;
  INFO("MEDQ_CRASH_SEED=" << seed);
  Harness h(repo, state.path(), seed);
  for (int i = 0; i < kills; ++i)
    h.Cycle(i, kills);
  CHECK(h.kills() == kills);
  h.Check();
}

TEST_CASE("crash: store damage and a full disk between kills lose nothing silently",
          "[e2e][crash]") {
  ModelRepo repo;
  TempDir state;
  SmallFilesystem tmpfs(state.path(), "4m");  // without it (no CAP_SYS_ADMIN): no full disk
  const auto seed = static_cast<uint32_t>(EnvInt("MEDQ_CRASH_SEED", std::random_device{}()));
  const int kills = std::max(8, EnvInt("MEDQ_CRASH_KILLS", 100) / 3);
  std::cout << "crash harness with damage: seed " << seed << ", " << kills << " kills"
            << (tmpfs.ok() ? "" : " (no full disk: cannot mount a tmpfs)") << std::endl;
  INFO("MEDQ_CRASH_SEED=" << seed);
  Harness h(repo, state.path(), seed, /*damage=*/true, /*full_disk=*/tmpfs.ok());
  for (int i = 0; i < kills; ++i)
    h.Cycle(i, kills);
  CHECK(h.damages() > 0);
  h.Check();
}

}  // namespace
}  // namespace medq::test
