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
};

// What Open found: empty `moved_aside` when the existing store was used.
struct OpenReport {
  std::filesystem::path moved_aside;
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
  // nullopt when there is no such job; an error when its row is damaged.
  Result<std::optional<StoredJob>> Get(uint64_t id);
  // Every unfinished job, in the order they are to run again: priority
  // (high first), then id.
  Result<std::vector<UnfinishedJob>> Unfinished();
  // Deletes finished jobs whose result is older than `before`; their count.
  Result<int64_t> DeleteFinishedBefore(double before);
  // The largest id ever given (0 for a new store); ids are never reused.
  Result<uint64_t> MaxId();
  StoreStats Stats();

  // Testing (medqd --test-fault-injection): the next write kills the process
  // with SIGKILL after its statement ran and before it commits, as a crash in
  // the middle of a write would.
  void ArmKillInWrite() { kill_in_write_ = true; }

 private:
  JobStore(std::filesystem::path path, sqlite3* db, int lock_fd);
  Status Exec(const char* sql);
  // Runs `sql` with `bind` in one write transaction; the changed rows.
  template <typename Bind>
  Result<int64_t> Write(const char* sql, Bind bind);
  void RememberMaxId();
  void AfterDelete();

  std::filesystem::path path_;
  sqlite3* db_;
  int lock_fd_;
  bool kill_in_write_ = false;
};

}  // namespace medq::daemon::store
