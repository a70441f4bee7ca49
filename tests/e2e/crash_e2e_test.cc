// The crash harness: a real daemon gets a mixed workload (priorities,
// submitted and streaming jobs, cancels, forgets) and is SIGKILLed at random
// moments, some of them inside the job store's writes (inject-fault
// store-write), then restarted on the same store, again and again. At the
// end every accepted job has exactly one result, equal to its solo run; none
// is lost, none has two different results; cancelled and forgotten jobs
// stay so. MEDQ_CRASH_KILLS sets the number of kills (default 100); the
// seed is printed, and MEDQ_CRASH_SEED repeats a run.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
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
  bool cancelled = false;    // a cancel of it was answered
  bool forgotten = false;    // a forget of it was answered
  std::optional<json> seen;  // a finished result fetched before a later kill
};

class Harness {
 public:
  Harness(const ModelRepo& repo, const std::filesystem::path& state, uint32_t seed)
      : args_(DaemonArgs(repo, {"--state-dir", state.string(), "--max-queue", "1000",
                                "--test-fault-injection", "--max-concurrent", "2"})),
        rng_(seed) {}

  // One life of the daemon: a workload, then a kill (by SIGKILL at a random
  // moment, or inside a store write).
  void Cycle(int i) {
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
        if ((*e)["event"] == "queued" || (*e)["event"] == "started") {
          std::lock_guard lock(mu_);
          streamed_job = (*e)["job"];
          jobs_[streamed_job].params = streamed_params;
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
  }

  // After the last kill: every accepted job's one result.
  void Check() {
    DaemonProcess d(args_);
    int done = 0, cancelled = 0, forgotten = 0, lost = 0, mismatched = 0;
    std::map<std::string, std::string> solo;  // params -> text, run alone now
    for (auto& [job, a] : jobs_) {
      INFO(job << " " << a.params.dump());
      if (a.forgotten) {
        auto status = TryCall(d.socket(), "status", {{"job", job}});
        REQUIRE(status.has_value());
        CHECK((*status)["code"] == "INVALID_REQUEST");
        ++forgotten;
        continue;
      }
      auto reply = TryCall(d.socket(), "result", {{"job", job}, {"wait", true}}, 300s);
      REQUIRE(reply.has_value());
      if ((*reply)["event"] != "result") {
        ++lost;
        continue;
      }
      const json result = (*reply)["result"];
      if (a.seen) CHECK(result == *a.seen);  // one result, never two
      if (a.cancelled) {
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
                        {"accepted_after_a_killed_write", unexpected_}}}}
                     .dump()
              << std::endl;
    CHECK(lost == 0);
    CHECK(mismatched == 0);
    CHECK(unexpected_ == 0);
    CHECK(done > 0);
  }

  int kills() const { return kills_; }

 private:
  void Submit(const std::string& socket) {
    json params = RandomParams(rng_);
    auto reply = TryCall(socket, "submit", {{"op", "generate"}, {"params", params}});
    if (!reply || (*reply)["event"] != "result") return;
    std::lock_guard lock(mu_);
    jobs_[(*reply)["result"]["job"]].params = params;
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
          return state == "done" || state == "failed" || state == "cancelled";
        };
        if (r && (*r)["event"] == "result" && finished((*r)["result"]["state"])) {
          if (jobs_[job].seen) CHECK(*jobs_[job].seen == (*r)["result"]);
          jobs_[job].seen = (*r)["result"];
        }
      }
    }
  }

  std::vector<std::string> args_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::map<std::string, Accepted> jobs_;
  int kills_ = 0;
  int kills_in_writes_ = 0;
  int unexpected_ = 0;
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
    h.Cycle(i);
  CHECK(h.kills() == kills);
  h.Check();
}

}  // namespace
}  // namespace medq::test
