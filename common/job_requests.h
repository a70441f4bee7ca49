// Typed requests of the durable-job ops (docs/protocol.md: submit, status,
// result, forget), shared by the daemon and the CLI. A wrong type is
// INVALID_REQUEST naming the field.
#pragma once

#include <string>

#include "common/protocol.h"
#include "common/result.h"

namespace medq {

// submit: {"op": "generate" | "embed", "params": {...that op's params}}.
// The inner params are checked by that op's own parser, as if sent directly.
struct SubmitRequest {
  std::string op;
  Params params = Params::object();
};
Result<SubmitRequest> ParseSubmitRequest(const Params& params);

// status, forget: {"job": "j42"}; result adds "wait" (default false: answer
// at once, with the state when the job has not finished).
struct JobRequest {
  std::string job;
  bool wait = false;
};
Result<JobRequest> ParseJobRequest(const Params& params);
Result<JobRequest> ParseResultRequest(const Params& params);

}  // namespace medq
