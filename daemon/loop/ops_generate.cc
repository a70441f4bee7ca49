// The generate and cancel ops: a generation's way from the request through
// the scheduler's generate queue to the worker's batch, and its events back
// to the client.
#include <spdlog/spdlog.h>

#include "common/elapsed.h"
#include "common/generate_params.h"
#include "common/requests.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// A generation from submission to its final reply, as the loop sees it.
struct Session {
  explicit Session(Responder r) : reply(std::move(r)) {}
  Responder reply;
  Clock::time_point submitted = Clock::now();
  Clock::time_point started;
  bool first_token_seen = false;
  bool quiet = false;  // detached (submit, replay): no events, only the result is recorded
  std::string job;     // its id in the job store; empty without one
  std::string text;    // a recorded job's text so far, for its result
  int64_t tokens = 0;  // token events so far
  // Its model's circuit breaker hears how it ended.
  std::shared_ptr<CircuitBreaker::Ticket> ticket;
};

void OnDone(DaemonState& s, const std::string& model_name, Session& session,
            Result<GenerateDone> result) {
  if (!result.ok()) {
    const Error& error = result.error();
    // A job stopped at its deadline keeps what it produced: streamed to its
    // client already, and recorded with the job.
    json partial = nullptr;
    if (error.code == ErrorCode::kTimeout) {
      partial = {{"text", std::move(session.text)}, {"completion_tokens", session.tokens}};
    }
    s.jobs.Finish(session.job, error, s.draining, std::move(partial));
    spdlog::info("generate {}: {} ({})", model_name, ErrorCodeName(error.code), error.message);
    if (error.code == ErrorCode::kGpuOom) s.metrics.CountGpuOom();
    // A device that keeps failing pauses its model (circuit_breaker.h);
    // health turns "degraded" with the reason meanwhile.
    SettleTicket(session.ticket.get(), &error, false);
    return session.reply.Fail(error);
  }
  SettleTicket(session.ticket.get(), nullptr, result->finish_reason != FinishReason::kCancelled);
  GenerateDone done = std::move(*result);
  done.timings.queued_ms =
      std::chrono::duration<double, std::milli>(session.started - session.submitted).count();
  done.timings.total_ms = MsSince(session.submitted);
  s.metrics.ObserveQueueWait(done.timings.queued_ms / 1000);
  s.metrics.ObserveGeneration(done.timings.total_ms / 1000, done.usage.completion_tokens);
  if (!session.job.empty() && done.finish_reason == FinishReason::kCancelled && !s.draining) {
    // Stopped while running by a cancellation outside the drain (its client
    // gone, forget): recorded `cancelled` with the CANCELLED error, as a job
    // cancelled while waiting is, not `done`. Its client still gets `done`.
    s.jobs.Finish(
        session.job,
        Error(ErrorCode::kCancelled, "job " + session.job + " was cancelled while running"),
        s.draining);
  } else if (!session.job.empty()) {
    json recorded = done;
    recorded["text"] = std::move(session.text);
    s.jobs.Finish(session.job, std::move(recorded), s.draining);
  }
  session.reply.Done(done);
}

// Loop thread: the generation's model is resolved and the job recorded (its
// id is `job`, or empty without a job store); it joins the generate queue.
void SubmitGenerate(DaemonState& s, std::shared_ptr<GenerateSpec> spec,
                    std::shared_ptr<Session> session, const std::string& job,
                    const JobIntake& intake) {
  JobSpec job_spec =
      IntakeJobSpec(s, intake, JobClass::kGenerate, "generate", job,
                    {spec->params.priority, spec->params.queue_timeout_s, spec->params.timeout_s});
  session->job = job;
  session->quiet = intake.detached;
  job_spec.on_position = [session](const std::string& job_id, int position, int waiting,
                                   double wait_s) {
    if (session->quiet) return;
    session->reply.Event(QueuedEvent{job_id, position, waiting, wait_s});
  };
  GenerationCallbacks callbacks;
  callbacks.started = [session, spec](const std::string& job_id) {
    session->started = Clock::now();
    if (!session->quiet) session->reply.Event(StartedEvent{job_id});
    spdlog::info("job {}: generating with {} (max_tokens {})", job_id, spec->model_name,
                 spec->params.max_tokens ? std::to_string(*spec->params.max_tokens) : "default");
  };
  callbacks.token = [&s, session](TokenEvent event) {
    if (!session->job.empty()) session->text += event.text;
    ++session->tokens;
    if (!session->first_token_seen) {
      session->first_token_seen = true;
      s.metrics.ObserveFirstToken(MsSince(session->submitted) / 1000);
    }
    if (session->quiet) return;
    session->reply.Event(std::move(event));
  };
  callbacks.done = [&s, session, name = spec->model_name](Result<GenerateDone> done) {
    OnDone(s, name, *session, std::move(done));
  };
  // Patient data: only with log_prompts (main warns at start that it is on).
  auto queued = s.scheduler.SubmitGeneration(std::move(job_spec), spec, s.config.log_prompts,
                                             std::move(callbacks));
  if (!queued.ok()) {
    s.jobs.Finish(job, queued.error(), s.draining);
    return session->reply.Fail(queued.error());
  }
  WhenQueued(s, intake, *queued, session->reply);
}

}  // namespace

void StartGenerateJob(DaemonState& s, GenerateParams params, Responder reply, JobIntake intake) {
  auto spec = std::make_shared<GenerateSpec>();
  spec->params = std::move(params);
  auto session = std::make_shared<Session>(std::move(reply));
  ResolveModel(
      s, spec->params.model, spec->params.adapter,
      [&s, spec, session, intake = std::move(intake)](Result<ResolvedModel> found) {
        if (!found.ok()) return session->reply.Fail(found.error());
        if (Status st = RequireKind(found->name, found->kind, ModelKind::kGeneration); !st.ok()) {
          return session->reply.Fail(st.error());
        }
        auto ticket = AdmitToModel(s, intake, found->name);
        if (!ticket.ok()) return session->reply.Fail(ticket.error());
        session->ticket = std::move(*ticket);
        spec->model_name = found->name;
        spec->model_dir = found->dir;
        spec->adapter_dir = found->adapter_dir;
        const Priority priority = *PriorityFromName(spec->params.priority);
        s.jobs.Admit(store::JobOp::kGenerate, JobClass::kGenerate, priority, ToJson(spec->params),
                     intake, [&s, spec, session, intake](Result<std::string> job) {
                       if (!job.ok()) return session->reply.Fail(job.error());
                       SubmitGenerate(s, spec, session, *job, intake);
                     });
      });
}

void GenerateOp(DaemonState& s, const Request& req, Responder reply) {
  auto params = ParseGenerateParams(req.params);
  if (!params.ok()) return reply.Fail(params.error());
  JobIntake intake;
  intake.owner = reply.owner();
  StartGenerateJob(s, std::move(*params), std::move(reply), std::move(intake));
}

void CancelOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseCancelRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  const std::string job = request->job;
  const Error unknown(
      ErrorCode::kInvalidRequest,
      "no waiting or running generation or embed request \"" + Echo(job) + "\"; see `medq queue`");
  // Another user's job does not exist for this client, as for status,
  // result and forget: the same answer as an unknown id, so that ids (which
  // `queue` lists) cannot be probed for their owners.
  const std::optional<std::string> owner =
      s.jobs.IsLive(job) ? s.jobs.LiveOwner(job) : s.scheduler.OwnerOf(job);
  if (owner && !MayActOnJob(*owner, reply.owner())) return reply.Fail(unknown);
  // `recorded`: the job's cancellation is its recorded result, even when it
  // ended meanwhile.
  auto stop = [&s, job, unknown](Responder& r, bool recorded) {
    switch (s.scheduler.Cancel(job)) {
      case Scheduler::Cancelled::kRemoved:
        return r.Result({{"job", job}, {"state", "cancelled"}});
      case Scheduler::Cancelled::kStopping:
        return r.Result({{"job", job}, {"state", "cancelling"}});
      case Scheduler::Cancelled::kUnknown:
        if (recorded) return r.Result({{"job", job}, {"state", "cancelled"}});
        break;
    }
    r.Fail(unknown);
  };
  if (!s.jobs.IsLive(job)) return stop(reply, false);
  // A recorded job: its cancellation is on disk before it stops.
  auto shared = std::make_shared<Responder>(std::move(reply));
  s.jobs.Cancel(job, [shared, stop](Status recorded) {
    if (!recorded.ok()) return shared->Fail(recorded.error());
    stop(*shared, true);
  });
}

}  // namespace medq::daemon
