// The job store on its own: rows in and out, one result per job, the replay
// order, ids never reused, expiry, the lock, and the row check that stands
// between a hostile database and the daemon.
#include "daemon/store/job_store.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/support/daemon_process.h"

namespace medq::daemon::store {
namespace {

using test::TempDir;

NewJob Job(uint64_t id, int priority, const std::string& prompt = "hi") {
  NewJob j;
  j.id = id;
  j.priority = priority;
  j.params = nlohmann::json{{"prompt", prompt}}.dump();
  j.owner = "uid:1000";
  j.created_at = 1000 + static_cast<double>(id);
  return j;
}

std::unique_ptr<JobStore> OpenStore(const std::filesystem::path& dir) {
  OpenReport report;
  auto store = JobStore::Open(dir, &report);
  REQUIRE(store.ok());
  CHECK(report.moved_aside.empty());
  return std::move(*store);
}

TEST_CASE("job store: a job is inserted, finished once and read back", "[store]") {
  TempDir dir;
  auto store = OpenStore(dir.path());
  REQUIRE(store->Insert(Job(1, 1, "first")).ok());
  auto job = store->Get(1);
  REQUIRE(job.ok());
  REQUIRE(job->has_value());
  CHECK((*job)->state == JobState::kQueued);
  CHECK((*job)->params["prompt"] == "first");
  CHECK((*job)->owner == "uid:1000");

  auto first = store->Finish(1, JobState::kDone, R"({"text":"a"})", 2000);
  REQUIRE(first.ok());
  CHECK(*first);
  // A second result is refused: a job has one.
  auto second = store->Finish(1, JobState::kFailed, R"({"text":"b"})", 2001);
  REQUIRE(second.ok());
  CHECK(!*second);
  job = store->Get(1);
  CHECK((*job)->state == JobState::kDone);
  CHECK((*job)->result["text"] == "a");
  CHECK(*(*job)->finished_at == 2000);

  CHECK(!store->Get(99)->has_value());
  CHECK(store->Insert(Job(1, 1)).error().code == ErrorCode::kInternal);  // a duplicate id
}

TEST_CASE("job store: unfinished jobs come back by priority, then id", "[store]") {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    REQUIRE(store->Insert(Job(1, 2)).ok());
    REQUIRE(store->Insert(Job(2, 1)).ok());
    REQUIRE(store->Insert(Job(3, 0)).ok());
    REQUIRE(store->Insert(Job(4, 1)).ok());
    REQUIRE(store->Insert(Job(5, 0)).ok());
    REQUIRE(*store->Finish(4, JobState::kCancelled, "{}", 1));
  }
  auto store = OpenStore(dir.path());  // as after a restart
  auto unfinished = store->Unfinished();
  REQUIRE(unfinished.ok());
  std::vector<uint64_t> ids;
  for (const UnfinishedJob& u : *unfinished) {
    CHECK(u.job.ok());
    ids.push_back(u.id);
  }
  CHECK(ids == std::vector<uint64_t>{3, 5, 2, 1});
  const StoreStats stats = store->Stats();
  CHECK(stats.queued == 4);
  CHECK(stats.cancelled == 1);
  CHECK(stats.bytes > 0);
}

TEST_CASE("job store: ids are never reused, even after the newest is deleted", "[store]") {
  TempDir dir;
  auto store = OpenStore(dir.path());
  CHECK(*store->MaxId() == 0);
  REQUIRE(store->Insert(Job(7, 1)).ok());
  REQUIRE(store->Insert(Job(8, 1)).ok());
  CHECK(*store->MaxId() == 8);
  REQUIRE(*store->Forget(8));
  CHECK(!*store->Forget(8));
  CHECK(*store->MaxId() == 8);
  REQUIRE(*store->Finish(7, JobState::kDone, "{}", 50));
  CHECK(*store->DeleteFinishedBefore(100) == 1);
  CHECK(*store->MaxId() == 8);
  store.reset();
  CHECK(*OpenStore(dir.path())->MaxId() == 8);
}

TEST_CASE("job store: expiry deletes finished results only", "[store]") {
  TempDir dir;
  auto store = OpenStore(dir.path());
  REQUIRE(store->Insert(Job(1, 1)).ok());
  REQUIRE(store->Insert(Job(2, 1)).ok());
  REQUIRE(store->Insert(Job(3, 1)).ok());
  REQUIRE(*store->Finish(1, JobState::kDone, "{}", 10));
  REQUIRE(*store->Finish(2, JobState::kDone, "{}", 30));
  CHECK(*store->DeleteFinishedBefore(20) == 1);
  CHECK(!store->Get(1)->has_value());
  CHECK(store->Get(2)->has_value());
  CHECK(store->Get(3)->has_value());  // unfinished: never expires
}

TEST_CASE("job store: one process at a time", "[store]") {
  TempDir dir;
  auto first = OpenStore(dir.path());
  OpenReport report;
  auto second = JobStore::Open(dir.path(), &report);
  REQUIRE(!second.ok());
  CHECK_THAT(second.error().message, Catch::Contains("in use by another medqd"));
  first.reset();
  CHECK(JobStore::Open(dir.path(), &report).ok());
}

TEST_CASE("job store: a damaged file is moved aside", "[store]") {
  TempDir dir;
  std::ofstream(dir.path() / "jobs.db") << std::string(10000, '\x7f');
  OpenReport report;
  auto store = JobStore::Open(dir.path(), &report);
  REQUIRE(store.ok());
  CHECK(!report.moved_aside.empty());
  CHECK(std::filesystem::exists(report.moved_aside));
  CHECK((*store)->Insert(Job(1, 1)).ok());
}

TEST_CASE("job rows: only a well-formed row becomes a job", "[store]") {
  RawJobRow good;
  good.id = 4;
  good.op = "embed";
  good.priority = 2;
  good.params = R"({"input":["a"]})";
  good.owner = "http";
  good.state = "done";
  good.created_at = 5;
  good.finished_at = 6;
  good.result = R"({"job":"j4"})";
  auto job = DecodeJobRow(good);
  REQUIRE(job.ok());
  CHECK(job->op == JobOp::kEmbed);
  CHECK(job->priority == 2);
  CHECK(job->result["job"] == "j4");

  struct Case {
    const char* what;
    std::function<void(RawJobRow&)> spoil;
  };
  const Case cases[] = {
      {"id", [](RawJobRow& r) { r.id = 0; }},
      {"op", [](RawJobRow& r) { r.op = "load"; }},
      {"priority", [](RawJobRow& r) { r.priority = 3; }},
      {"params", [](RawJobRow& r) { r.params = "[1,2]"; }},
      {"params", [](RawJobRow& r) { r.params = "{\"a\":"; }},
      {"params", [](RawJobRow& r) { r.params = std::string(300, '[') + std::string(300, ']'); }},
      {"owner", [](RawJobRow& r) { r.owner = ""; }},
      {"state", [](RawJobRow& r) { r.state = "running"; }},
      {"created_at", [](RawJobRow& r) { r.created_at = -1; }},
      {"finished_at", [](RawJobRow& r) { r.finished_at.reset(); }},
      {"result", [](RawJobRow& r) { r.result.reset(); }},
      {"result", [](RawJobRow& r) { r.result = "null"; }},
  };
  for (const Case& c : cases) {
    RawJobRow row = good;
    c.spoil(row);
    auto bad = DecodeJobRow(row);
    INFO(c.what);
    REQUIRE(!bad.ok());
    CHECK_THAT(bad.error().message, Catch::Contains(c.what));
  }
  // An unfinished row needs no result.
  RawJobRow queued = good;
  queued.state = "queued";
  queued.finished_at.reset();
  queued.result.reset();
  CHECK(DecodeJobRow(queued).ok());
}

TEST_CASE("job ids: j and a positive number, nothing else", "[store]") {
  CHECK(ParseJobId("j1") == 1u);
  CHECK(ParseJobId("j42") == 42u);
  CHECK(FormatJobId(42) == "j42");
  for (const char* bad :
       {"", "j", "j0", "j01", "42", "J4", "j-1", "j4x", "j99999999999999999999"}) {
    INFO(bad);
    CHECK(!ParseJobId(bad));
  }
}

}  // namespace
}  // namespace medq::daemon::store
