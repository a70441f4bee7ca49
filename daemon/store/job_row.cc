#include "daemon/store/job_row.h"

#include <charconv>
#include <cmath>

namespace medq::daemon::store {
namespace {

using nlohmann::ordered_json;

constexpr std::string_view kOpNames[] = {"generate", "embed"};
constexpr std::string_view kStateNames[] = {"queued", "done", "failed", "cancelled", "timed_out"};

Error Corrupt(std::string_view column, std::string_view why) {
  return Error(ErrorCode::kInternal,
               "stored job row: " + std::string(column) + " " + std::string(why));
}

// Parses a stored JSON object, depth-bounded like a request (nothing below
// the bound is built, so no recursive walk can overflow on a hostile row).
Result<ordered_json> ParseObject(std::string_view column, const std::string& text, size_t max_bytes,
                                 int max_depth) {
  if (text.size() > max_bytes) return Corrupt(column, "is too large");
  bool too_deep = false;
  const ordered_json::parser_callback_t guard = [&](int depth, ordered_json::parse_event_t event,
                                                    ordered_json&) {
    if ((event == ordered_json::parse_event_t::object_start ||
         event == ordered_json::parse_event_t::array_start) &&
        depth >= max_depth) {
      too_deep = true;
      return false;
    }
    return true;
  };
  ordered_json value;
  try {
    value = ordered_json::parse(text, guard);
  } catch (const nlohmann::json::exception&) {
    return Corrupt(column, "is not valid JSON");
  }
  if (too_deep) return Corrupt(column, "is nested too deeply");
  if (!value.is_object()) return Corrupt(column, "is not a JSON object");
  return value;
}

bool ValidTime(double t) {
  return std::isfinite(t) && t >= 0;
}

}  // namespace

std::string_view JobOpName(JobOp op) {
  return kOpNames[static_cast<int>(op)];
}

std::optional<JobOp> JobOpFromName(std::string_view name) {
  for (int i = 0; i < 2; ++i) {
    if (kOpNames[i] == name) return static_cast<JobOp>(i);
  }
  return std::nullopt;
}

std::string_view JobStateName(JobState state) {
  return kStateNames[static_cast<int>(state)];
}

std::optional<JobState> JobStateFromName(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kStateNames)); ++i) {
    if (kStateNames[i] == name) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

Result<StoredJob> DecodeJobRow(const RawJobRow& row) {
  StoredJob job;
  if (row.id <= 0) return Corrupt("id", "is not a positive integer");
  job.id = static_cast<uint64_t>(row.id);
  auto op = JobOpFromName(row.op);
  if (!op) return Corrupt("op", "names no op the store keeps");
  job.op = *op;
  if (row.priority < 0 || row.priority > 2) return Corrupt("priority", "is out of range");
  job.priority = static_cast<int>(row.priority);
  auto params = ParseObject("params", row.params, kMaxStoredParamsBytes, kMaxStoredJsonDepth);
  if (!params.ok()) return params.error();
  job.params = std::move(*params);
  if (row.owner.empty() || row.owner.size() > 64) return Corrupt("owner", "is malformed");
  job.owner = row.owner;
  auto state = JobStateFromName(row.state);
  if (!state) return Corrupt("state", "names no job state");
  job.state = *state;
  if (!ValidTime(row.created_at)) return Corrupt("created_at", "is not a time");
  job.created_at = row.created_at;
  if (IsFinished(job.state)) {
    if (!row.finished_at || !ValidTime(*row.finished_at)) {
      return Corrupt("finished_at", "is missing or not a time");
    }
    if (!row.result) return Corrupt("result", "is missing");
    auto result = ParseObject("result", *row.result, kMaxStoredResultBytes, kMaxStoredJsonDepth);
    if (!result.ok()) return result.error();
    job.finished_at = row.finished_at;
    job.result = std::move(*result);
  }
  return job;
}

std::optional<uint64_t> ParseJobId(std::string_view job) {
  if (job.size() < 2 || job.size() > 21 || job[0] != 'j' || job[1] == '0') return std::nullopt;
  uint64_t id = 0;
  const char* end = job.data() + job.size();
  auto [ptr, ec] = std::from_chars(job.data() + 1, end, id);
  if (ec != std::errc() || ptr != end || id > static_cast<uint64_t>(INT64_MAX)) {
    return std::nullopt;
  }
  return id;
}

std::string FormatJobId(uint64_t id) {
  return "j" + std::to_string(id);
}

}  // namespace medq::daemon::store
