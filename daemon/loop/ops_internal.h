// The op handlers, grouped by file; ops.cc lists them in the op table.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "daemon/loop/durable_jobs.h"
#include "daemon/loop/entry_points.h"
#include "daemon/loop/ops.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

// ops_generate.cc
void GenerateOp(DaemonState& state, const Request& request, Responder reply);
void CancelOp(DaemonState& state, const Request& request, Responder reply);

// ops.cc
// The model's circuit breaker admits a request for `model`: its ticket, to
// settle with its outcome, or NOT_READY while the model is paused. A job
// run again after a restart was accepted before: always admitted (its
// outcome still counts).
Result<std::shared_ptr<CircuitBreaker::Ticket>> AdmitToModel(DaemonState& state,
                                                             const JobIntake& intake,
                                                             const std::string& model);
// What a request's end says of its model's device: success, a device error
// (INTERNAL) or nothing.
void SettleTicket(CircuitBreaker::Ticket* ticket, const Error* error, bool completed);

// ops_embed.cc
void EmbedOp(DaemonState& state, const Request& request, Responder reply);

// ops_jobs.cc
void SubmitOp(DaemonState& state, const Request& request, Responder reply);
void StatusOp(DaemonState& state, const Request& request, Responder reply);
void ResultOp(DaemonState& state, const Request& request, Responder reply);
void ForgetOp(DaemonState& state, const Request& request, Responder reply);
// What a request asks of its job's place in the queue.
struct QueueAsk {
  std::string priority;  // its name, already checked
  std::optional<double> queue_timeout_s;
  std::optional<double> timeout_s;
};
// The job `job` (its id, empty without a job store) of `cls` for `op`, as
// `intake` brings it, owned by the intake's owner: the request's priority;
// its queue deadline, the request's queue_timeout_s at most the daemon's
// (none for a replayed job, which also waits past max_queue); and its run
// deadline, the request's timeout_s at most the daemon's request_timeout_s
// when that is set (or that alone), counted from the job's acceptance (a
// replayed job's first acceptance).
JobSpec IntakeJobSpec(const DaemonState& state, const JobIntake& intake, JobClass cls,
                      std::string op, const std::string& job, const QueueAsk& ask);
// The job is queued: a streaming client that goes away cancels it, and the
// intake hears of it (submit answers, a replay goes on to the next job).
void WhenQueued(DaemonState& state, const JobIntake& intake, const std::string& job,
                Responder& reply);
// Queues the jobs the store found unfinished at start, in order; then `done`.
void ReplayJobs(DaemonState& state, std::function<void()> done);

// ops_models.cc
struct ResolvedModel {
  std::string name;  // as requested, or the default model
  std::filesystem::path dir;
  std::filesystem::path adapter_dir;        // empty: none
  ModelKind kind = ModelKind::kGeneration;  // what the folder holds
};
// Resolves `model` ("" = the default) and `adapter` ("" = none) inside the
// models directories off the loop thread (loop/fs_work.h), then calls `next`
// on the loop thread: MODEL_NOT_FOUND / PERMISSION_DENIED as the resolver
// says, NOT_READY when the daemon began draining meanwhile.
void ResolveModel(DaemonState& state, const std::string& model, const std::string& adapter,
                  std::function<void(Result<ResolvedModel>)> next);

void ModelsOp(DaemonState& state, const Request& request, Responder reply);
void LoadOp(DaemonState& state, const Request& request, Responder reply);
void UnloadOp(DaemonState& state, const Request& request, Responder reply);
void TokenizeOp(DaemonState& state, const Request& request, Responder reply);
void DetokenizeOp(DaemonState& state, const Request& request, Responder reply);
void ApplyTemplateOp(DaemonState& state, const Request& request, Responder reply);

}  // namespace medq::daemon
