#include "daemon/store/job_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <system_error>

namespace medq::daemon::store {
namespace {

namespace fs = std::filesystem;

constexpr char kFileName[] = "jobs.db";
constexpr char kLockName[] = "jobs.lock";
constexpr double kDiskFullRetryS = 60;

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
    "CREATE TABLE IF NOT EXISTS ids (k INTEGER PRIMARY KEY CHECK (k = 0), next INTEGER NOT NULL);";

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

// Opens the database and checks it; `damaged` is set (and the handle closed)
// when the file is not a store this version can use.
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
    sqlite3_close(db);
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
      sqlite3_close(db);
      return nullptr;
    }
  }
  Statement version(db, "PRAGMA user_version");
  if (!version.ok() || version.Step() != SQLITE_ROW) return fail(version.rc(), "read the version");
  const int64_t v = sqlite3_column_int64(version.get(), 0);
  if (v > JobStore::kSchemaVersion) {
    *damaged = "newer";
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

void MoveAside(const fs::path& path, const std::string& why, OpenReport* report) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  fs::path aside = path;
  aside += "." + why + "-" + std::to_string(now);
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
  for (int attempt = 0;; ++attempt) {
    std::string damaged;
    Error error;
    sqlite3* db = OpenChecked(path, &damaged, &error);
    if (db != nullptr) {
      // The schema, and a probe of every column: a file that is SQLite but
      // holds a table of another shape is damage too.
      int rc = sqlite3_exec(db, kSchema, nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) {
        Statement probe(db, (std::string("SELECT ") + kColumns + " FROM jobs LIMIT 1").c_str());
        rc = probe.rc();
      }
      if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, "PRAGMA user_version=1", nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return std::unique_ptr<JobStore>(new JobStore(path, db, lock_fd));
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

Status JobStore::Exec(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return StoreError(db_, rc, "write");
  return Status::Ok();
}

template <typename Bind>
Result<int64_t> JobStore::Write(const char* sql, Bind bind) {
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
  if (kill_in_write_) raise(SIGKILL);  // testing: a crash between the write and its commit
  rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    Error error = StoreError(db_, rc, "commit");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return error;
  }
  return changed;
}

Status JobStore::Insert(const NewJob& job) {
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
      });
  if (!changed.ok()) return changed.error();
  return *changed > 0;
}

Result<bool> JobStore::Forget(uint64_t id) {
  RememberMaxId();
  auto changed = Write("DELETE FROM jobs WHERE id = ?", [&](sqlite3_stmt* s) {
    sqlite3_bind_int64(s, 1, static_cast<int64_t>(id));
  });
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
  auto job = DecodeJobRow(ReadRow(stmt.get()));
  if (!job.ok()) return job.error();
  return std::optional<StoredJob>(std::move(*job));
}

Result<std::vector<UnfinishedJob>> JobStore::Unfinished() {
  Statement stmt(db_, (std::string("SELECT ") + kColumns +
                       " FROM jobs WHERE state = 'queued' ORDER BY priority, id")
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
  RememberMaxId();
  auto changed = Write("DELETE FROM jobs WHERE state != 'queued' AND finished_at < ?",
                       [&](sqlite3_stmt* s) { sqlite3_bind_double(s, 1, before); });
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
  return static_cast<uint64_t>(std::max<int64_t>({max_row, max_given, 0}));
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
  return stats;
}

}  // namespace medq::daemon::store
