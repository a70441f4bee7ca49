// The embed op: a request's way from its params through the scheduler's
// embed queue to the worker's batcher (worker/embeddings.h), and its vectors
// back to the client.
#include <spdlog/spdlog.h>

#include "common/elapsed.h"
#include "common/requests.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct EmbedSession {
  explicit EmbedSession(Responder r) : reply(std::move(r)) {}
  Responder reply;
  Clock::time_point submitted = Clock::now();
  Clock::time_point started;
  std::string job;  // its id in the job store; empty without one
  // Its model's circuit breaker hears how it ended.
  std::shared_ptr<CircuitBreaker::Ticket> ticket;
};

void OnEmbedDone(DaemonState& s, EmbedSession& session, Result<EmbedResult> result) {
  if (!result.ok()) {
    const Error& error = result.error();
    s.jobs.Finish(session.job, error, s.draining);
    if (error.code == ErrorCode::kGpuOom) s.metrics.CountGpuOom();
    SettleTicket(session.ticket.get(), &error, false);
    // Never the texts: they are patient data.
    spdlog::info("embed: {} ({})", ErrorCodeName(error.code), error.message);
    return session.reply.Fail(error);
  }
  SettleTicket(session.ticket.get(), nullptr, true);
  EmbedResult out = std::move(*result);
  out.timings.queued_ms = MsBetween(session.submitted, session.started);
  out.timings.total_ms = MsBetween(session.submitted, Clock::now());
  const double total_s = out.timings.total_ms / 1000;
  s.metrics.ObserveQueueWait(out.timings.queued_ms / 1000);
  s.metrics.ObserveEmbedRequest(total_s, static_cast<int64_t>(out.embeddings.size()));
  if (!session.job.empty()) s.jobs.Finish(session.job, json(out), s.draining);
  session.reply.Embedded(out);
}

// Loop thread: the model is resolved and the job recorded (`job`, or empty
// without a job store); it joins the embed queue.
void SubmitEmbed(DaemonState& s, std::shared_ptr<EmbedSpec> spec,
                 std::shared_ptr<EmbedSession> session, const std::string& job,
                 const JobIntake& intake) {
  JobSpec job_spec = IntakeJobSpec(
      s, intake, JobClass::kEmbed, "embed", job,
      {spec->request.priority, spec->request.queue_timeout_s, spec->request.timeout_s});
  session->job = job;
  EmbedCallbacks callbacks;
  callbacks.started = [session](const std::string&) { session->started = Clock::now(); };
  callbacks.done = [&s, session](Result<EmbedResult> result) {
    OnEmbedDone(s, *session, std::move(result));
  };
  auto queued = s.scheduler.SubmitEmbed(std::move(job_spec), spec, std::move(callbacks));
  if (!queued.ok()) {
    s.jobs.Finish(job, queued.error(), s.draining);
    return session->reply.Fail(queued.error());
  }
  WhenQueued(s, intake, *queued, session->reply);
}

}  // namespace

void EmbedOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseEmbedRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  JobIntake intake;
  intake.owner = reply.owner();
  StartEmbedJob(s, std::move(*request), std::move(reply), std::move(intake));
}

void StartEmbedJob(DaemonState& s, EmbedRequest request, Responder reply, JobIntake intake) {
  const auto max_inputs = static_cast<size_t>(s.config.embed_max_inputs);
  if (request.input.size() > max_inputs) {
    return reply.Fail(
        InvalidField("input", "params.input holds " + std::to_string(request.input.size()) +
                                  " texts; embed takes at most " + std::to_string(max_inputs) +
                                  " (embed_max_inputs): split the request"));
  }
  const std::string name = request.model.empty() ? s.config.embed_model : request.model;
  if (name.empty()) {
    return reply.Fail(Error(ErrorCode::kModelNotFound,
                            "no model named in params.model and no default embedding model "
                            "configured (medqd --embed-model NAME)"));
  }
  auto spec = std::make_shared<EmbedSpec>();
  spec->request = std::move(request);
  auto session = std::make_shared<EmbedSession>(std::move(reply));
  ResolveModel(
      s, name, "", [&s, spec, session, intake = std::move(intake)](Result<ResolvedModel> found) {
        if (!found.ok()) return session->reply.Fail(found.error());
        if (Status st = RequireKind(found->name, found->kind, ModelKind::kEmbedding); !st.ok()) {
          return session->reply.Fail(st.error());
        }
        auto ticket = AdmitToModel(s, intake, found->name);
        if (!ticket.ok()) return session->reply.Fail(ticket.error());
        session->ticket = std::move(*ticket);
        spec->model_name = found->name;
        spec->model_dir = found->dir;
        const Priority priority = *PriorityFromName(spec->request.priority);
        s.jobs.Admit(store::JobOp::kEmbed, JobClass::kEmbed, priority, ToParams(spec->request),
                     intake, [&s, spec, session, intake](Result<std::string> job) {
                       if (!job.ok()) return session->reply.Fail(job.error());
                       SubmitEmbed(s, spec, session, *job, intake);
                     });
      });
}

}  // namespace medq::daemon
