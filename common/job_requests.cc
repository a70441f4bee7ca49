#include "common/job_requests.h"

#include "common/params.h"

namespace medq {
namespace {

Status ReadJob(const Params& p, JobRequest& r) {
  if (Status st = ReadString(p, "job", r.job); !st.ok()) return st;
  if (r.job.empty()) return InvalidAt("params.job", "must be a job id string, e.g. \"j42\"");
  return Status::Ok();
}

}  // namespace

Result<SubmitRequest> ParseSubmitRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"op", "params"}); !st.ok()) return st.error();
  SubmitRequest r;
  if (Status st = ReadString(p, "op", r.op); !st.ok()) return st.error();
  if (r.op != "generate" && r.op != "embed") {
    return InvalidAt("params.op", "must be \"generate\" or \"embed\": the ops a job may run");
  }
  if (auto it = p.find("params"); it != p.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidAt("params.params", "must be an object: the op's params");
    r.params = *it;
  }
  return r;
}

Result<JobRequest> ParseJobRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"job"}); !st.ok()) return st.error();
  JobRequest r;
  if (Status st = ReadJob(p, r); !st.ok()) return st.error();
  return r;
}

Result<JobRequest> ParseResultRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"job", "wait"}); !st.ok()) return st.error();
  JobRequest r;
  if (Status st = ReadJob(p, r); !st.ok()) return st.error();
  if (Status st = ReadBool(p, "wait", r.wait); !st.ok()) return st.error();
  return r;
}

}  // namespace medq
