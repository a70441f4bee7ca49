#include "daemon/store/job_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <system_error>

#include "common/elapsed.h"

namespace medq::daemon::store {
namespace {

namespace fs = std::filesystem;

constexpr char kFileName[] = "jobs.db";
constexpr char kLockName[] = "jobs.lock";
constexpr char kMarkName[] = "jobs.mark";
constexpr char kBallastName[] = "jobs.ballast";
constexpr double kDiskFullRetryS = 60;
// Room a full disk gives back so that jobs can still be forgotten: enough for
// the write-ahead log frames of deleting a few large rows.
constexpr off_t kBallastBytes = 128 * 1024;

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS jobs ("
    "  id INTEGER PRIMARY KEY,"
    "  op TEXT NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  params TEXT NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  state TEXT NOT NULL,"
    "  created_at REAL NOT NULL,"
    "  finished_at REAL,"
    "  result TEXT);"
    "CREATE INDEX IF NOT EXISTS jobs_unfinished ON jobs(state, priority, id);"
    // Ids are never reused, even after the newest job is forgotten.
    "CREATE TABLE IF NOT EXISTS ids (k INTEGER PRIMARY KEY CHECK (k = 0), next INTEGER NOT NULL);"
    // The store's identity and its count of commits, checked against the
    // mark (store_mark.h).
    "CREATE TABLE IF NOT EXISTS meta (k INTEGER PRIMARY KEY CHECK (k = 0), store TEXT NOT NULL,"
    "  commits INTEGER NOT NULL);"
    // Ids given out whose records damage took.
    "CREATE TABLE IF NOT EXISTS lost (first INTEGER NOT NULL, last INTEGER NOT NULL,"
    "  at REAL NOT NULL, why TEXT NOT NULL);";

constexpr char kColumns[] =
    "id, op, priority, params, owner, state, created_at, finished_at, result";

// One prepared statement, finalized on scope exit.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  int rc() const { return rc_; }
  sqlite3_stmt* get() const { return stmt_; }
  int Step() { return rc_ = sqlite3_step(stmt_); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::string Text(sqlite3_stmt* s, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  return p != nullptr ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, col)))
                      : std::string();
}

RawJobRow ReadRow(sqlite3_stmt* s) {
  RawJobRow row;
  row.id = sqlite3_column_int64(s, 0);
  row.op = Text(s, 1);
  row.priority = sqlite3_column_int64(s, 2);
  row.params = Text(s, 3);
  row.owner = Text(s, 4);
  row.state = Text(s, 5);
  row.created_at = sqlite3_column_double(s, 6);
  if (sqlite3_column_type(s, 7) != SQLITE_NULL) row.finished_at = sqlite3_column_double(s, 7);
  if (sqlite3_column_type(s, 8) != SQLITE_NULL) row.result = Text(s, 8);
  return row;
}

Error StoreError(sqlite3* db, int rc, std::string_view doing) {
  if ((rc & 0xff) == SQLITE_FULL) {
    return Error(ErrorCode::kNotReady,
                 "the job store's disk is full: the job was not accepted; free space in the "
                 "daemon's state directory",
                 kDiskFullRetryS);
  }
  return Error(ErrorCode::kInternal, "job store: " + std::string(doing) + ": " +
                                         (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
}

bool IsDamage(int rc) {
  rc &= 0xff;
  return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

bool IsFull(const Error& e) {
  return e.code == ErrorCode::kNotReady;  // StoreError's only NOT_READY is a full disk
}

struct Meta {
  std::string store;
  uint64_t commits = 0;
};

// The meta row, or nullopt when the table or its row is missing, or its
// identity is damaged (it goes into the mark, which takes only identities).
std::optional<Meta> ReadMeta(sqlite3* db) {
  Statement stmt(db, "SELECT store, commits FROM meta WHERE k = 0");
  if (!stmt.ok() || stmt.Step() != SQLITE_ROW) return std::nullopt;
  std::string store = Text(stmt.get(), 0);
  if (!IsStoreId(store)) return std::nullopt;
  return Meta{std::move(store), static_cast<uint64_t>(sqlite3_column_int64(stmt.get(), 1))};
}

// What the database lacks of what its mark says it holds; "" when nothing.
std::string CompareWithMark(sqlite3* db, const StoreMark& mark) {
  const std::optional<Meta> meta = ReadMeta(db);
  if (!meta) return "jobs.db does not hold the store's jobs: it was emptied or replaced";
  if (meta->store != mark.store) return "jobs.db holds another store's jobs: it was replaced";
  if (meta->commits < mark.commits) {
    return std::to_string(mark.commits - meta->commits) +
           " committed write(s) are missing from jobs.db and its write-ahead log (damaged)";
  }
  return "";
}

// Copies the database and its WAL aside, as they are, before anything is
// written: the evidence of damage the store goes on from.
fs::path CopyAside(const fs::path& path) {
  fs::path aside = path;
  aside += ".lost-" + std::to_string(static_cast<int64_t>(EpochSeconds()));
  std::error_code ec;
  fs::copy_file(path, aside, fs::copy_options::overwrite_existing, ec);
  fs::path wal = path, aside_wal = aside;
  wal += "-wal";
  aside_wal += "-wal";
  if (fs::exists(wal, ec)) fs::copy_file(wal, aside_wal, fs::copy_options::overwrite_existing, ec);
  return aside;
}

// Opens the database and checks it; `damaged` is set (and the handle closed)
// when the file is not a store this version can use. The handle is closed
// with sqlite3_close_v2: a check's statement is still open there, and
// sqlite3_close would refuse, leaking the connection and its descriptors.
sqlite3* OpenChecked(const fs::path& path, std::string* damaged, Error* error) {
  // Created 0600 before SQLite sees it: its -wal and -shm files copy the mode.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = Error(ErrorCode::kInternal, "job store: cannot open " + path.string() + ": " +
                                             std::system_category().message(errno));
    return nullptr;
  }
  fchmod(fd, 0600);
  ::close(fd);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  auto fail = [&](int code, std::string_view doing) -> sqlite3* {
    if (IsDamage(code)) {
      *damaged = "damaged";
    } else {
      *error = StoreError(db, code, doing);
    }
    sqlite3_close_v2(db);
    return nullptr;
  };
  if (rc != SQLITE_OK) return fail(rc, "open");
  sqlite3_busy_timeout(db, 5000);
  rc =
      sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA secure_delete=ON;",
                   nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return fail(rc, "set up");
  {
    Statement check(db, "PRAGMA quick_check");
    if (!check.ok()) return fail(check.rc(), "check");
    if (check.Step() != SQLITE_ROW) return fail(check.rc(), "check");
    if (Text(check.get(), 0) != "ok") {
      *damaged = "damaged";
      sqlite3_close_v2(db);
      return nullptr;
    }
  }
  Statement version(db, "PRAGMA user_version");
  if (!version.ok() || version.Step() != SQLITE_ROW) return fail(version.rc(), "read the version");
  const int64_t v = sqlite3_column_int64(version.get(), 0);
  if (v > JobStore::kSchemaVersion) {
    *damaged = "newer";
    sqlite3_close_v2(db);
    return nullptr;
  }
  return db;
}

void MoveAside(const fs::path& path, const std::string& why, OpenReport* report) {
  fs::path aside = path;
  aside += "." + why + "-" + std::to_string(static_cast<int64_t>(EpochSeconds()));
  std::error_code ec;
  fs::rename(path, aside, ec);
  fs::path wal = path, aside_wal = aside;
  wal += "-wal";
  aside_wal += "-wal";
  fs::rename(wal, aside_wal, ec);
  fs::path shm = path;
  shm += "-shm";
  fs::remove(shm, ec);
  report->moved_aside = aside;
  report->why = why == "newer" ? "it was written by a newer medqd" : "it is damaged";
}

}  // namespace

Result<std::unique_ptr<JobStore>> JobStore::Open(const fs::path& dir, OpenReport* report) {
  *report = OpenReport{};
  // A folder made here is the daemon's alone (0700); an existing one keeps
  // its mode (systemd's StateDirectoryMode), the files in it are 0600.
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir.parent_path(), ec);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return Error(ErrorCode::kInternal, "job store: cannot create " + dir.string() + ": " +
                                             std::system_category().message(errno));
    }
  }
  const fs::path lock_path = dir / kLockName;
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    if (lock_fd >= 0) ::close(lock_fd);
    return Error(ErrorCode::kInternal,
                 "job store " + dir.string() +
                     " is in use by another medqd: give each daemon its own state_dir");
  }
  const fs::path path = dir / kFileName;
  std::optional<StoreMark> mark;
  if (auto read = ReadStoreMark(dir / kMarkName); read.ok()) {
    mark = *read;
  } else {
    report->mark_problem = read.error().message + "; damage to jobs.db before now cannot be seen";
  }
  for (int attempt = 0;; ++attempt) {
    std::string damaged;
    Error error;
    sqlite3* db = OpenChecked(path, &damaged, &error);
    if (db != nullptr) {
      // Before anything is written, so that the copy shows what was found.
      if (mark && report->damage.empty()) {
        if (!report->moved_aside.empty()) {
          report->damage = "jobs.db was damaged (moved aside)";
        } else {
          report->damage = CompareWithMark(db, *mark);
          if (!report->damage.empty()) report->copied_aside = CopyAside(path);
        }
      }
      // The schema, and a probe of every column: a file that is SQLite but
      // holds a table of another shape is damage too.
      int rc = sqlite3_exec(db, kSchema, nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) {
        Statement probe(db, (std::string("SELECT ") + kColumns + " FROM jobs LIMIT 1").c_str());
        rc = probe.rc();
      }
      if (rc == SQLITE_OK) {
        // Written only when it changes: a store on a full disk still opens.
        Statement version(db, "PRAGMA user_version");
        if (version.ok() && version.Step() == SQLITE_ROW &&
            sqlite3_column_int64(version.get(), 0) != kSchemaVersion) {
          rc = sqlite3_exec(db, "PRAGMA user_version=1", nullptr, nullptr, nullptr);
        }
      }
      if (rc == SQLITE_OK) {
        std::unique_ptr<JobStore> store(new JobStore(path, db, lock_fd));
        if (Status st = store->Reconcile(mark, report); !st.ok()) {
          return st.error();
        }
        return store;
      }
      if (IsDamage(rc) || (rc & 0xff) == SQLITE_ERROR) {
        damaged = "damaged";
      } else {
        error = StoreError(db, rc, "create the schema");
      }
      sqlite3_close(db);
    }
    if (damaged.empty() || attempt > 0) {
      ::close(lock_fd);
      if (!damaged.empty())
        error = Error(ErrorCode::kInternal, "job store: a new store is damaged");
      return error;
    }
    MoveAside(path, damaged, report);
  }
}

JobStore::JobStore(fs::path path, sqlite3* db, int lock_fd)
    : path_(std::move(path)), db_(db), lock_fd_(lock_fd) {}

JobStore::~JobStore() {
  sqlite3_close(db_);
  ::close(lock_fd_);  // releases the flock
}

Status JobStore::Reconcile(std::optional<StoreMark> mark, OpenReport* report) {
  const std::optional<Meta> meta = ReadMeta(db_);
  Meta now{meta ? meta->store : mark ? mark->store : NewStoreId(), meta ? meta->commits : 0};
  auto held = MaxId();  // floor_ is 0 yet: the database's own
  if (!held.ok()) return held.error();
  uint64_t last_id = *held;
  if (mark) {
    last_id = std::max(last_id, mark->last_id);
    if (!report->damage.empty()) {
      // The database goes on from what it holds; the ids given out above it
      // are lost, and no id is given again below the mark's reserved floor
      // (its last_id may lag after a power loss).
      if (mark->last_id > *held) {
        report->lost_first = *held + 1;
        report->lost_last = mark->last_id;
      }
      floor_ = std::max(mark->reserved, last_id);
      now.commits = std::max(now.commits, mark->commits);
    }
  }
  floor_ = std::max(floor_, last_id);
  if (report->lost_first != 0) {
    Statement lost(db_, "INSERT INTO lost (first, last, at, why) VALUES (?, ?, ?, ?)");
    sqlite3_bind_int64(lost.get(), 1, static_cast<int64_t>(report->lost_first));
    sqlite3_bind_int64(lost.get(), 2, static_cast<int64_t>(report->lost_last));
    sqlite3_bind_double(lost.get(), 3, EpochSeconds());
    sqlite3_bind_text(lost.get(), 4, report->damage.data(), static_cast<int>(report->damage.size()),
                      SQLITE_STATIC);
    if (!lost.ok() || lost.Step() != SQLITE_DONE) return StoreError(db_, lost.rc(), "record");
  }
  if (!meta || meta->store != now.store || meta->commits != now.commits) {
    Statement put(db_, "INSERT OR REPLACE INTO meta (k, store, commits) VALUES (0, ?, ?)");
    sqlite3_bind_text(put.get(), 1, now.store.data(), static_cast<int>(now.store.size()),
                      SQLITE_STATIC);
    sqlite3_bind_int64(put.get(), 2, static_cast<int64_t>(now.commits));
    if (!put.ok() || put.Step() != SQLITE_DONE) return StoreError(db_, put.rc(), "record");
  }
  mark_ = StoreMark{now.store, now.commits, last_id,
                    std::max(mark ? mark->reserved : 0, floor_) + kIdBlock};
  if (Status st = WriteStoreMark(path_.parent_path() / kMarkName, mark_, /*durable=*/true);
      !st.ok()) {
    report->mark_problem = st.error().message;
  }
  KeepBallast();
  return Status::Ok();
}

void JobStore::SaveMark(bool durable) {
  if (Status st = WriteStoreMark(path_.parent_path() / kMarkName, mark_, durable); !st.ok()) {
    // Not damage: a mark that lags the database is never taken for it.
    spdlog::debug("{}", st.error().message);
  }
}

void JobStore::KeepBallast() {
  const fs::path path = path_.parent_path() / kBallastName;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size < kBallastBytes &&
      posix_fallocate(fd, 0, kBallastBytes) != 0) {
    // No room for it now: none until a later write finds some.
    ::close(fd);
    ::unlink(path.c_str());
    return;
  }
  ::close(fd);
}

bool JobStore::ReleaseBallast() {
  const fs::path path = path_.parent_path() / kBallastName;
  if (::unlink(path.c_str()) != 0) return false;
  spdlog::warn("job store: the disk is full; its reserve ({} KiB) is given up to free space",
               kBallastBytes / 1024);
  return true;
}

Status JobStore::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return StoreError(db_, rc, "write");
  return Status::Ok();
}

template <typename Bind>
Result<int64_t> JobStore::Write(const char* sql, Bind bind, bool frees) {
  auto written = WriteOnce(sql, bind);
  if (!written.ok() && frees && IsFull(written.error()) && ReleaseBallast()) {
    written = WriteOnce(sql, bind);
  }
  return written;
}

template <typename Bind>
Result<int64_t> JobStore::WriteOnce(const char* sql, Bind& bind) {
  int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return StoreError(db_, rc, "begin a write");
  {
    Statement stmt(db_, sql);
    if (stmt.ok()) {
      bind(stmt.get());
      rc = stmt.Step();
    } else {
      rc = stmt.rc();
    }
  }
  if (rc != SQLITE_DONE) {
    Error error = StoreError(db_, rc, "write");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  const int64_t changed = sqlite3_changes64(db_);
  // Every commit is counted, in the database and then in the mark: a
  // database found behind its mark lost commits (store_mark.h).
  rc = sqlite3_exec(db_, "UPDATE meta SET commits = commits + 1 WHERE k = 0", nullptr, nullptr,
                    nullptr);
  if (rc != SQLITE_OK) {
    Error error = StoreError(db_, rc, "write");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  if (kill_in_write_) raise(SIGKILL);  // testing: a crash between the write and its commit
  rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    Error error = StoreError(db_, rc, "commit");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  ++mark_.commits;
  SaveMark(/*durable=*/false);
  return changed;
}

Status JobStore::Insert(const NewJob& job) {
  if (job.id > mark_.reserved) {
    // The next block of ids, on disk before one of them is given: after any
    // damage, ids go on above it.
    StoreMark next = mark_;
    next.reserved = job.id + kIdBlock;
    if (Status st = WriteStoreMark(path_.parent_path() / kMarkName, next, /*durable=*/true);
        !st.ok()) {
      return Error(ErrorCode::kNotReady,
                   st.error().message +
                       ": the job was not accepted; free space in the daemon's "
                       "state directory",
                   kDiskFullRetryS);
    }
    mark_ = next;
  }
  mark_.last_id = std::max(mark_.last_id, job.id);
  auto changed = Write(
      "INSERT INTO jobs (id, op, priority, params, owner, state, created_at) "
      "VALUES (?, ?, ?, ?, ?, 'queued', ?)",
      [&](sqlite3_stmt* s) {
        sqlite3_bind_int64(s, 1, static_cast<int64_t>(job.id));
        const std::string_view op = JobOpName(job.op);
        sqlite3_bind_text(s, 2, op.data(), static_cast<int>(op.size()), SQLITE_STATIC);
        sqlite3_bind_int(s, 3, job.priority);
        sqlite3_bind_text64(s, 4, job.params.data(), job.params.size(), SQLITE_STATIC, SQLITE_UTF8);
        sqlite3_bind_text(s, 5, job.owner.data(), static_cast<int>(job.owner.size()),
                          SQLITE_STATIC);
        sqlite3_bind_double(s, 6, job.created_at);
      });
  if (!changed.ok()) return changed.error();
  return Status::Ok();
}

Result<bool> JobStore::Finish(uint64_t id, JobState state, const std::string& result,
                              double finished_at) {
  auto changed = Write(
      "UPDATE jobs SET state = ?, result = ?, finished_at = ? WHERE id = ? AND state = 'queued'",
      [&](sqlite3_stmt* s) {
        const std::string_view name = JobStateName(state);
        sqlite3_bind_text(s, 1, name.data(), static_cast<int>(name.size()), SQLITE_STATIC);
        sqlite3_bind_text64(s, 2, result.data(), result.size(), SQLITE_STATIC, SQLITE_UTF8);
        sqlite3_bind_double(s, 3, finished_at);
        sqlite3_bind_int64(s, 4, static_cast<int64_t>(id));
      },
      /*frees=*/true);
  if (!changed.ok()) return changed.error();
  return *changed > 0;
}

Result<bool> JobStore::Forget(uint64_t id) {
  RememberMaxId();
  auto changed = Write(
      "DELETE FROM jobs WHERE id = ?",
      [&](sqlite3_stmt* s) { sqlite3_bind_int64(s, 1, static_cast<int64_t>(id)); },
      /*frees=*/true);
  if (!changed.ok()) return changed.error();
  if (*changed > 0) AfterDelete();
  return *changed > 0;
}

Result<std::optional<StoredJob>> JobStore::Get(uint64_t id) {
  Statement stmt(db_, (std::string("SELECT ") + kColumns + " FROM jobs WHERE id = ?").c_str());
  if (!stmt.ok()) return StoreError(db_, stmt.rc(), "read");
  sqlite3_bind_int64(stmt.get(), 1, static_cast<int64_t>(id));
  const int rc = stmt.Step();
  if (rc == SQLITE_DONE) return std::optional<StoredJob>();
  if (rc != SQLITE_ROW) return StoreError(db_, rc, "read");
  const RawJobRow row = ReadRow(stmt.get());
  auto job = DecodeJobRow(row);
  if (!job.ok()) {
    // Still a job: it can be looked at and forgotten, never run.
    StoredJob damaged;
    damaged.id = id;
    if (!row.owner.empty() && row.owner.size() <= 64) damaged.owner = row.owner;
    damaged.state = JobStateFromName(row.state).value_or(JobState::kFailed);
    damaged.damage = job.error().message;
    return std::optional<StoredJob>(std::move(damaged));
  }
  return std::optional<StoredJob>(std::move(*job));
}

Result<std::optional<LostJob>> JobStore::Lost(uint64_t id) {
  Statement stmt(db_, "SELECT at, why FROM lost WHERE ? BETWEEN first AND last LIMIT 1");
  if (!stmt.ok()) return StoreError(db_, stmt.rc(), "read");
  sqlite3_bind_int64(stmt.get(), 1, static_cast<int64_t>(id));
  const int rc = stmt.Step();
  if (rc == SQLITE_DONE) return std::optional<LostJob>();
  if (rc != SQLITE_ROW) return StoreError(db_, rc, "read");
  return std::optional<LostJob>(LostJob{sqlite3_column_double(stmt.get(), 0), Text(stmt.get(), 1)});
}

Result<std::vector<UnfinishedJob>> JobStore::Unfinished() {
  // From the rows themselves, not the index: the quick check does not compare
  // an index with its table, and a damaged jobs_unfinished would otherwise
  // run a finished job again or never run a queued one. The quick check has
  // just read every page anyway.
  Statement stmt(db_, (std::string("SELECT ") + kColumns +
                       " FROM jobs NOT INDEXED WHERE state = 'queued' ORDER BY priority, id")
                          .c_str());
  if (!stmt.ok()) return StoreError(db_, stmt.rc(), "read");
  std::vector<UnfinishedJob> jobs;
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    RawJobRow row = ReadRow(stmt.get());
    const auto id = static_cast<uint64_t>(row.id);
    jobs.push_back(UnfinishedJob{id, DecodeJobRow(row)});
  }
  if (rc != SQLITE_DONE) return StoreError(db_, rc, "read");
  return jobs;
}

Result<int64_t> JobStore::DeleteFinishedBefore(double before) {
  {
    // Nothing expired: no write (none to count, none to fail on a full disk).
    Statement any(db_, "SELECT 1 FROM jobs WHERE state != 'queued' AND finished_at < ? LIMIT 1");
    if (!any.ok()) return StoreError(db_, any.rc(), "read");
    sqlite3_bind_double(any.get(), 1, before);
    const int rc = any.Step();
    if (rc == SQLITE_DONE) return int64_t{0};
    if (rc != SQLITE_ROW) return StoreError(db_, rc, "read");
  }
  RememberMaxId();
  auto changed = Write(
      "DELETE FROM jobs WHERE state != 'queued' AND finished_at < ?",
      [&](sqlite3_stmt* s) { sqlite3_bind_double(s, 1, before); },
      /*frees=*/true);
  if (!changed.ok()) return changed.error();
  if (*changed > 0) AfterDelete();
  return *changed;
}

Result<uint64_t> JobStore::MaxId() {
  Statement stmt(db_, "SELECT max(id) FROM jobs");
  if (!stmt.ok() || stmt.Step() != SQLITE_ROW) return StoreError(db_, stmt.rc(), "read");
  const int64_t max_row = sqlite3_column_int64(stmt.get(), 0);
  Statement next(db_, "SELECT max(next) FROM ids");
  if (!next.ok() || next.Step() != SQLITE_ROW) return StoreError(db_, next.rc(), "read");
  const int64_t max_given = sqlite3_column_int64(next.get(), 0);
  return std::max(floor_, static_cast<uint64_t>(std::max<int64_t>({max_row, max_given, 0})));
}

void JobStore::RememberMaxId() {
  // Before rows are deleted: the largest id is kept so it is never given again.
  sqlite3_exec(db_,
               "INSERT INTO ids (k, next) SELECT 0, coalesce(max(id), 0) FROM jobs WHERE true "
               "ON CONFLICT (k) DO UPDATE SET next = max(next, excluded.next)",
               nullptr, nullptr, nullptr);
}

void JobStore::AfterDelete() {
  // The WAL's frames still hold the deleted rows' old pages: empty it.
  sqlite3_exec(db_, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  KeepBallast();  // room again, maybe: the reserve for the next full disk
}

StoreStats JobStore::Stats() {
  StoreStats stats;
  std::error_code ec;
  for (const char* suffix : {"", "-wal"}) {
    fs::path p = path_;
    p += suffix;
    const auto size = fs::file_size(p, ec);
    if (!ec) stats.bytes += static_cast<int64_t>(size);
  }
  Statement stmt(db_, "SELECT state, count(*) FROM jobs GROUP BY state");
  if (!stmt.ok()) return stats;
  while (stmt.Step() == SQLITE_ROW) {
    const std::string state = Text(stmt.get(), 0);
    const int64_t n = sqlite3_column_int64(stmt.get(), 1);
    if (state == "queued") stats.queued = n;
    if (state == "done") stats.done = n;
    if (state == "failed") stats.failed = n;
    if (state == "cancelled") stats.cancelled = n;
    if (state == "timed_out") stats.timed_out = n;
  }
  Statement lost(db_, "SELECT coalesce(sum(last - first + 1), 0) FROM lost");
  if (lost.ok() && lost.Step() == SQLITE_ROW) stats.lost = sqlite3_column_int64(lost.get(), 0);
  return stats;
}

}  // namespace medq::daemon::store
