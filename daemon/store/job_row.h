// One durable job as the store keeps it, and the check that turns a row read
// back from the database into one. Pure functions, no SQLite: the row decoder
// is what a corrupt or hostile database reaches, so it is fuzzed on its own
// (tests/fuzz/).
//
// A row is trusted only after DecodeJobRow accepted it: a known op and state,
// a priority in range, params that parse as a JSON object, and for a finished
// job a result that parses as a JSON object. Anything else is an error value
// naming the column; the daemon then fails that job instead of running half a
// job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace medq::daemon::store {

// The ops whose jobs the store keeps.
enum class JobOp { kGenerate, kEmbed };
std::string_view JobOpName(JobOp op);
std::optional<JobOp> JobOpFromName(std::string_view name);

// queued: accepted, not finished (it runs again after a restart);
// done / failed / cancelled / timed_out: finished, with a result.
enum class JobState { kQueued, kDone, kFailed, kCancelled, kTimedOut };
std::string_view JobStateName(JobState state);
std::optional<JobState> JobStateFromName(std::string_view name);
inline bool IsFinished(JobState s) {
  return s != JobState::kQueued;
}

// The columns of a row as SQLite hands them back, not yet trusted.
struct RawJobRow {
  int64_t id = 0;
  std::string op;
  int64_t priority = 0;
  std::string params;  // JSON text
  std::string owner;
  std::string state;
  double created_at = 0;  // seconds since the epoch
  std::optional<double> finished_at;
  std::optional<std::string> result;  // JSON text
};

// A decoded row. `params` keeps the client's key order (ordered_json), as the
// chat template must see it when the job runs again.
struct StoredJob {
  uint64_t id = 0;  // the job id is "j" + id
  JobOp op = JobOp::kGenerate;
  int priority = 1;               // 0 high, 1 normal, 2 low (daemon/loop/job_queue.h)
  nlohmann::ordered_json params;  // the request's params
  std::string owner;              // who may read it: "uid:N" or "http"
  JobState state = JobState::kQueued;
  double created_at = 0;
  std::optional<double> finished_at;
  nlohmann::ordered_json result;  // finished jobs: the final reply (see docs/protocol.md)
  // Set when the row did not decode (JobStore::Get): why. Then only `id`,
  // `owner` (empty when unreadable) and `state` (kFailed when unreadable)
  // are known; the job can be looked at and forgotten, never run.
  std::string damage;
};

// Limits on what a row may hold; larger rows are refused, not read.
inline constexpr size_t kMaxStoredParamsBytes = size_t{64} << 20;
inline constexpr size_t kMaxStoredResultBytes = size_t{256} << 20;
inline constexpr int kMaxStoredJsonDepth = 256;

Result<StoredJob> DecodeJobRow(const RawJobRow& row);

// "j42" -> 42; nullopt for anything else.
std::optional<uint64_t> ParseJobId(std::string_view job);
std::string FormatJobId(uint64_t id);

}  // namespace medq::daemon::store
