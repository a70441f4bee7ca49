// The durable job store (daemon/store/job_store.h) opened on a damaged state
// directory: what a crash, a bad disk or a hand edit leaves in jobs.db, its
// write-ahead log and jobs.mark. JobStore::Open must check, move aside or
// reconcile it; every read (MaxId, Unfinished, Get, Lost, Stats) and a few
// writes (Insert, Finish, Forget, DeleteFinishedBefore) then run on what it
// opened, and the store's own promises are checked:
// - no id it holds is above MaxId, and MaxId is an id SQLite can hold;
// - MaxId is at least the mark's last id (ids are never given twice), and
//   after damage at least the mark's reserved floor;
// - ids it reports lost are not held, and Lost knows them;
// - an Insert's id (MaxId + 1) is none the store held, is under the mark's
//   durable floor once Insert returns, reads back, has one result, and is
//   forgotten once; after a reopen, MaxId is still at least that id;
// - reopening a store after its own writes finds no lost commits.
// SQLite is the system's library (not instrumented): libFuzzer's coverage is
// the store's own code, the row decoder and nlohmann's parser.
//
// The input (tests/fuzz/make_seeds.py writes valid and damaged stores):
//   byte 0     flags: 1 write jobs.mark, 2 write jobs.db-wal, 4 write no
//              jobs.db at all, 8 close and reopen the store after the writes;
//              16 the inserted job is an embed, 128 DeleteFinishedBefore
//              reaches it; (byte 0 >> 5) % 3 is its priority
//   byte 1     one more id to look up (Get, Lost)
//   bytes 2-3  the mark's length, little-endian (cut to what follows)
//   bytes 4-7  the WAL's length, likewise
//   then the mark, the WAL, and the rest is jobs.db.
// The files go to a directory of this process's own, emptied before each
// input; on tmpfs (/dev/shm) when there is one, so that synchronous=FULL's
// fsyncs cost little.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

#include "daemon/store/job_store.h"
#include "daemon/store/store_mark.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

namespace fs = std::filesystem;
namespace store = medq::daemon::store;
using medq::fuzz::Fail;

constexpr uint64_t kLargestId = INT64_MAX;  // SQLite's largest integer
constexpr size_t kHeadBytes = 8;

fs::path& StoreDir() {
  static fs::path dir;
  return dir;
}

void RemoveStoreDir() {
  std::error_code ec;
  if (!StoreDir().empty()) fs::remove_all(StoreDir(), ec);
}

// This process's store directory, made on the first call.
const fs::path& Dir() {
  fs::path& dir = StoreDir();
  if (!dir.empty()) return dir;
  std::error_code ec;
  fs::path base = "/dev/shm";
  if (!fs::is_directory(base, ec) || access(base.c_str(), W_OK) != 0) {
    const char* tmp = std::getenv("TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string name = (base / "medq-job-store-fuzz-XXXXXX").string();
  if (mkdtemp(name.data()) == nullptr) Fail("mkdtemp");
  dir = name;
  std::atexit(RemoveStoreDir);
  return dir;
}

// Empties the directory (the store leaves its lock, -shm, ballast and the
// copies it moved aside).
void Clean(const fs::path& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) Fail("opendir");
  const int fd = dirfd(d);
  while (const dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(fd, e->d_name, 0) != 0) {
      std::error_code ec;
      fs::remove_all(dir / name, ec);
    }
  }
  closedir(d);
}

void WriteFile(const fs::path& path, std::string_view bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Fail("open for writing");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) Fail("write");
    done += static_cast<size_t>(n);
  }
  close(fd);
}

// How many file descriptors this process has open: one the store leaked
// raises it.
int OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) Fail("opendir /proc/self/fd");
  int n = 0;
  while (readdir(d) != nullptr)
    ++n;
  closedir(d);
  return n;
}

uint64_t Le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

std::optional<store::StoreMark> MarkIn(const fs::path& dir) {
  auto mark = store::ReadStoreMark(dir / "jobs.mark");
  if (!mark.ok()) return std::nullopt;
  return *mark;
}

// Everything the store reads, with its promises checked. The ids it holds
// (from Get and Unfinished) go to `held`; the largest id it holds or has
// given, to `max_id`.
void ReadAll(store::JobStore& db, const store::OpenReport& report,
             const std::optional<store::StoreMark>& mark, uint64_t probe, uint64_t* max_id,
             std::set<uint64_t>* held) {
  auto max = db.MaxId();
  if (!max.ok()) return;
  if (*max > kLargestId) Fail("MaxId is past the largest id SQLite can hold");
  if (mark && *max < mark->last_id) Fail("MaxId is below the mark's last id");
  if (mark && !report.damage.empty() && *max < mark->reserved) {
    Fail("after damage, MaxId is below the mark's reserved floor");
  }
  *max_id = *max;

  std::set<uint64_t> ids = {probe, *max, *max + 1};
  if (mark) ids.insert(mark->last_id);
  if (auto unfinished = db.Unfinished(); unfinished.ok()) {
    for (const store::UnfinishedJob& u : *unfinished) {
      if (u.id > 0 && u.id <= kLargestId && u.id > *max) Fail("an unfinished job is above MaxId");
      if (u.job.ok()) {
        if (u.job->id != u.id) Fail("an unfinished job's id is not its row's");
        if (u.job->state != store::JobState::kQueued) Fail("an unfinished job is finished");
      }
      if (ids.size() < 12) ids.insert(u.id);
    }
  }
  if (report.lost_first != 0) {
    if (report.lost_first > report.lost_last) Fail("the lost ids are an empty range");
    if (report.lost_last > *max) Fail("a lost id is above MaxId");
    for (uint64_t id : {report.lost_first, report.lost_last}) {
      auto lost = db.Lost(id);
      if (lost.ok() && !*lost) Fail("an id Open reported lost is not in Lost");
      auto got = db.Get(id);
      if (got.ok() && *got) Fail("an id Open reported lost is held");
    }
  }
  for (uint64_t id : ids) {
    auto got = db.Get(id);
    if (got.ok() && *got) {
      if ((*got)->id != id) Fail("Get returned another id");
      if (id > 0 && id <= kLargestId) {
        if (id > *max) Fail("Get found a job above MaxId");
        held->insert(id);
      }
    }
    (void)db.Lost(id);
  }
  (void)db.Stats();
}

// An Insert above MaxId, its result, and its forgetting; the id Insert gave,
// or 0 when it failed.
uint64_t WriteSome(store::JobStore& db, const fs::path& dir, uint64_t max_id,
                   const std::set<uint64_t>& held, uint8_t flags) {
  if (max_id >= kLargestId) return 0;
  store::NewJob job;
  job.id = max_id + 1;
  if (held.count(job.id) != 0) Fail("Insert's id is one the store holds");
  job.op = (flags & 0x10) != 0 ? store::JobOp::kEmbed : store::JobOp::kGenerate;
  job.priority = (flags >> 5) % 3;
  job.params = R"({"prompt":"hi","max_tokens":4})";
  job.owner = "uid:1000";
  job.created_at = 1.0;
  if (!db.Insert(job).ok()) return 0;
  auto mark = MarkIn(dir);
  if (!mark || mark->reserved < job.id) Fail("an id was given above the mark's reserved floor");
  auto got = db.Get(job.id);
  if (got.ok()) {
    if (!*got) Fail("an inserted job does not read back");
    if (!(*got)->damage.empty() || (*got)->state != store::JobState::kQueued) {
      Fail("an inserted job reads back damaged or finished");
    }
  }
  auto finished = db.Finish(job.id, store::JobState::kDone, R"({"text":"ok"})", 2.0);
  if (finished.ok()) {
    if (!*finished) Fail("Finish of a queued job wrote nothing");
    auto again = db.Finish(job.id, store::JobState::kFailed, "{}", 3.0);
    if (again.ok() && *again) Fail("a job got two results");
  }
  (void)db.DeleteFinishedBefore((flags & 0x80) != 0 ? 2.5 : 0.0);
  auto forgotten = db.Forget(job.id);
  if (forgotten.ok() && *forgotten) {
    auto again = db.Forget(job.id);
    if (again.ok() && *again) Fail("a job was forgotten twice");
    auto gone = db.Get(job.id);
    if (gone.ok() && *gone) Fail("a forgotten job still reads back");
  }
  return job.id;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeadBytes) return 0;
  const uint8_t flags = data[0];
  const uint64_t probe = data[1];
  std::string_view rest(reinterpret_cast<const char*>(data) + kHeadBytes, size - kHeadBytes);
  const std::string_view mark_bytes = rest.substr(0, Le(data + 2, 2));
  rest.remove_prefix(mark_bytes.size());
  const std::string_view wal_bytes = rest.substr(0, Le(data + 4, 4));
  rest.remove_prefix(wal_bytes.size());

  const fs::path& dir = Dir();
  const int fds_before = OpenFds();
  Clean(dir);
  if ((flags & 4) == 0) WriteFile(dir / "jobs.db", rest);
  if ((flags & 2) != 0) WriteFile(dir / "jobs.db-wal", wal_bytes);
  if ((flags & 1) != 0) WriteFile(dir / "jobs.mark", mark_bytes);
  const std::optional<store::StoreMark> mark = MarkIn(dir);

  {
    store::OpenReport report;
    auto opened = store::JobStore::Open(dir, &report);
    if (opened.ok()) {
      std::unique_ptr<store::JobStore> db = std::move(*opened);
      uint64_t max_id = 0;
      std::set<uint64_t> held;
      ReadAll(*db, report, mark, probe, &max_id, &held);
      const uint64_t given = WriteSome(*db, dir, max_id, held, flags);
      if ((flags & 8) != 0) {
        db.reset();
        store::OpenReport again;
        auto reopened = store::JobStore::Open(dir, &again);
        if (reopened.ok()) {
          if (!again.damage.empty() && again.moved_aside.empty()) {
            Fail("the store took its own writes for damage");
          }
          const uint64_t top = std::max(given, held.empty() ? 0 : *held.rbegin());
          auto max = (*reopened)->MaxId();
          if (max.ok() && *max < top) Fail("after a reopen, MaxId is below an id given or held");
        }
      }
    }
  }
  if (OpenFds() != fds_before) Fail("a file descriptor leaked");
  return 0;
}
