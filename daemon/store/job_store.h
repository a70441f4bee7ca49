// The durable job store: accepted jobs and their results in an embedded
// SQLite database, <state_dir>/jobs.db. Store thread only (store_thread.h):
// every call may block on the disk.
//
// Durability: WAL journal with synchronous=FULL, so a commit is on disk (the
// WAL fsynced) before Insert or Finish returns: a job whose Insert returned is
// "accepted" and survives SIGKILL, a crash of the machine, or power loss.
// Privacy: prompts and outputs (params, results) are patient data; this file
// is the only place they are written. A folder made here is 0700 and the
// database 0600 (SQLite gives its -wal and -shm files the database's mode);
// secure_delete overwrites deleted rows, and the WAL is truncated after rows
// are deleted, so a forgotten or expired job does not linger on disk.
// Damage: a database that does not open, fails its quick check, or was
// written by a newer schema is moved aside (jobs.db.<why>-<time>) and a new
// one is created; Open says so, and the daemon logs it and warns in health.
// Damage SQLite cannot see (an emptied or replaced jobs.db, commits dropped
// from a damaged WAL) is found with the store's mark (store_mark.h): the
// files are copied aside (jobs.db.lost-<time>), the store goes on with what
// it still holds, the ids given out that it no longer holds are recorded as
// lost (Lost), and ids go on above every id ever given.
// A full disk: writes fail NOT_READY; a small ballast file (jobs.ballast)
// is given up so that forgetting jobs can still free space.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "daemon/store/job_row.h"
#include "daemon/store/store_mark.h"

struct sqlite3;

namespace medq::daemon::store {

struct NewJob {
  uint64_t id = 0;
  JobOp op = JobOp::kGenerate;
  int priority = 1;
  std::string params;  // JSON text, the client's key order
  std::string owner;   // "uid:N" or "http"
  double created_at = 0;
};

struct StoreStats {
  int64_t bytes = 0;  // the database and its WAL on disk
  int64_t queued = 0;
  int64_t done = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t timed_out = 0;
  int64_t lost = 0;  // ids recorded as lost to damage
};

// What Open found: empty `moved_aside` when the existing store was used.
struct OpenReport {
  std::filesystem::path moved_aside;
  std::string why;
  // Damage the mark revealed: what, where the files were copied, and the
  // ids lost (lost_first..lost_last; none when lost_first is 0).
  std::string damage;
  std::filesystem::path copied_aside;
  uint64_t lost_first = 0;
  uint64_t lost_last = 0;
  // The mark could not be read (it is made anew) or written: a warning.
  std::string mark_problem;
};

// A job whose record was lost to damage of the store.
struct LostJob {
  double at = 0;  // when the damage was found, seconds since the epoch
  std::string why;
};

// An unfinished row, or why it could not be read (its id is still known).
struct UnfinishedJob {
  uint64_t id = 0;
  Result<StoredJob> job;
};

class JobStore {
 public:
  static constexpr int kSchemaVersion = 1;

  // Opens or creates <dir>/jobs.db, creating `dir` (0700) when missing.
  // Refuses (an error, nothing moved) when another process holds the store;
  // moves a damaged or newer store aside as the header says.
  static Result<std::unique_ptr<JobStore>> Open(const std::filesystem::path& dir,
                                                OpenReport* report);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Records an accepted job (state queued). A full disk is NOT_READY with a
  // retry hint; the job is then not accepted.
  Status Insert(const NewJob& job);
  // Records the result of an unfinished job. False (and nothing written) when
  // the job is already finished or was forgotten: a job has one result.
  Result<bool> Finish(uint64_t id, JobState state, const std::string& result, double finished_at);
  // Deletes a job; false when there was none.
  Result<bool> Forget(uint64_t id);
  // nullopt when there is no such job; a row that does not decode comes
  // back with StoredJob::damage set.
  Result<std::optional<StoredJob>> Get(uint64_t id);
  // Whether `id` was given out and then lost to damage (Open).
  Result<std::optional<LostJob>> Lost(uint64_t id);
  // Every unfinished job, in the order they are to run again: priority
  // (high first), then id.
  Result<std::vector<UnfinishedJob>> Unfinished();
  // Deletes finished jobs whose result is older than `before`; their count.
  Result<int64_t> DeleteFinishedBefore(double before);
  // The largest id ever given (0 for a new store), or after damage the
  // mark's reserved floor; ids are never reused.
  Result<uint64_t> MaxId();
  StoreStats Stats();

  // Testing (medqd --test-fault-injection): the next write kills the process
  // with SIGKILL after its statement ran and before it commits, as a crash in
  // the middle of a write would.
  void ArmKillInWrite() { kill_in_write_ = true; }

 private:
  JobStore(std::filesystem::path path, sqlite3* db, int lock_fd);
  // After the database opened: compares it with the mark, records the
  // damage found, and writes the mark anew (Open).
  Status Reconcile(std::optional<StoreMark> mark, OpenReport* report);
  void SaveMark(bool durable);
  // A write failed with a full disk: gives up the ballast once, so that the
  // next try has room; true when there was one to give up.
  bool ReleaseBallast();
  void KeepBallast();
  Status Exec(const char* sql);
  // Runs `sql` with `bind` in one write transaction; the changed rows.
  // With `frees`, a write that frees space (a delete, a result replacing a
  // job): on a full disk it gives up the ballast and tries once more.
  template <typename Bind>
  Result<int64_t> Write(const char* sql, Bind bind, bool frees = false);
  template <typename Bind>
  Result<int64_t> WriteOnce(const char* sql, Bind& bind);
  void RememberMaxId();
  void AfterDelete();

  std::filesystem::path path_;
  sqlite3* db_;
  int lock_fd_;
  bool kill_in_write_ = false;
  StoreMark mark_;
  uint64_t floor_ = 0;  // no id at or below it is given (MaxId)
};

}  // namespace medq::daemon::store
