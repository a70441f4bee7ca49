// The durable-job ops (submit, status, result, forget) and the replay of the
// jobs a restart found unfinished. Generate and embed jobs go through the
// same StartGenerateJob / StartEmbedJob as the streaming ops; what differs is
// their JobIntake (daemon/loop/durable_jobs.h).
#include <spdlog/spdlog.h>

#include "common/elapsed.h"
#include "common/generate_params.h"
#include "common/job_requests.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;

// Where a replayed job's op answers: nobody listens, except for a failure
// before the job is queued again (its model is gone, its params no longer
// valid), which becomes the job's recorded result.
class ReplayChannel : public ReplyChannel {
 public:
  explicit ReplayChannel(std::function<void(const Error&)> on_error)
      : on_error_(std::move(on_error)) {}
  void SendEvent(const json&, const GenerateEvent&) override {}
  void SendDone(const json&, const GenerateDone&) override {}
  void SendEmbedResult(const json&, const EmbedResult&) override {}
  void SendResult(const json&, const json&) override {}
  void SendError(const json&, const Error& error) override {
    if (auto fn = std::exchange(on_error_, nullptr)) fn(error);
  }
  // Once the job is queued again, its ending is recorded by its op.
  void Disarm() { on_error_ = nullptr; }
  void BeginRequest() override {}
  void EndRequest() override {}
  bool closing() const override { return false; }
  void AddCloseHook(std::function<void()>) override {}  // no client to lose
  std::string owner() const override { return ""; }

 private:
  std::function<void(const Error&)> on_error_;
};

// Parses a job's params as its op reads them and starts it; params that do
// not parse fail through `reply`, naming what is wrong.
void StartJob(DaemonState& s, store::JobOp op, const Params& params, Responder reply,
              JobIntake intake) {
  if (op == store::JobOp::kGenerate) {
    auto parsed = ParseGenerateParams(params);
    if (!parsed.ok()) return reply.Fail(parsed.error());
    StartGenerateJob(s, std::move(*parsed), std::move(reply), std::move(intake));
  } else {
    auto parsed = ParseEmbedRequest(params);
    if (!parsed.ok()) return reply.Fail(parsed.error());
    StartEmbedJob(s, std::move(*parsed), std::move(reply), std::move(intake));
  }
}

// Runs the unfinished jobs one after another, each queued before the next
// starts, so that they keep their order (priority, then id); then `done`.
void ReplayFrom(DaemonState& s, std::shared_ptr<std::vector<store::UnfinishedJob>> jobs,
                size_t next, std::function<void()> done) {
  if (next == jobs->size()) return done();
  store::UnfinishedJob& unfinished = (*jobs)[next];
  const std::string job = store::FormatJobId(unfinished.id);
  auto go_on = [&s, jobs, next, done] { ReplayFrom(s, jobs, next + 1, done); };
  if (!unfinished.job.ok()) {
    // A row that does not decode never runs as half a job: it fails.
    spdlog::error("job {} cannot run again: {}", job, unfinished.job.error().message);
    s.jobs.BeginReplay(job, "", nullptr);
    s.jobs.Finish(job, unfinished.job.error(), false);
    return go_on();
  }
  const store::StoredJob& stored = *unfinished.job;
  auto channel = std::make_shared<ReplayChannel>([&s, job, go_on](const Error& error) {
    spdlog::info("job {} cannot run again: {} ({})", job, ErrorCodeName(error.code), error.message);
    s.jobs.Finish(job, error, s.draining);
    go_on();
  });
  s.jobs.BeginReplay(job, stored.owner, channel);
  JobIntake intake;
  intake.owner = stored.owner;
  intake.replay_id = stored.id;
  intake.accepted_at = stored.created_at;
  intake.detached = true;
  intake.accepted = [go_on, weak = std::weak_ptr<ReplayChannel>(channel)](const std::string&,
                                                                          Responder&) {
    if (auto c = weak.lock()) c->Disarm();
    go_on();
  };
  spdlog::info("job {} ({}) runs again after a restart", job, store::JobOpName(stored.op));
  StartJob(s, stored.op, stored.params,
           Responder(channel, nullptr, std::string(store::JobOpName(stored.op)), nullptr),
           std::move(intake));
}

}  // namespace

JobSpec IntakeJobSpec(const DaemonState& s, const JobIntake& intake, JobClass cls, std::string op,
                      const std::string& job, const QueueAsk& ask) {
  JobSpec spec;
  spec.cls = cls;
  spec.op = std::move(op);
  spec.id = job;
  spec.owner = intake.owner;
  spec.priority = *PriorityFromName(ask.priority);
  if (intake.replay_id) {
    // Accepted before the restart: it waits as long as it takes, even past
    // max_queue.
    spec.past_limit = true;
  } else {
    const double queue_s =
        std::min(s.config.queue_timeout_s, ask.queue_timeout_s.value_or(s.config.queue_timeout_s));
    spec.deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(queue_s * 1000));
  }
  const double daemon_s = s.config.request_timeout_s;
  std::optional<double> seconds = ask.timeout_s;
  if (daemon_s > 0) seconds = std::min(ask.timeout_s.value_or(daemon_s), daemon_s);
  if (seconds) {
    const double now = EpochSeconds();
    const double left = *seconds - std::max(0.0, now - intake.accepted_at.value_or(now));
    spec.timeout_s = *seconds;
    spec.timeout_at =
        JobQueue::Clock::now() + std::chrono::duration_cast<JobQueue::Clock::duration>(
                                     std::chrono::duration<double>(std::max(0.0, left)));
  }
  return spec;
}

void WhenQueued(DaemonState& s, const JobIntake& intake, const std::string& job, Responder& reply) {
  if (!intake.detached) {
    // A client that goes away cancels its job, waiting or running; a
    // connection closed by the daemon's own shutdown does not (the job runs
    // again after the restart).
    reply.OnClientGone([&s, job] {
      if (!s.draining) s.jobs.CancelRequested(job);
      s.scheduler.Cancel(job);
    });
  }
  if (intake.accepted) intake.accepted(job, reply);
}

void ReplayJobs(DaemonState& s, std::function<void()> done) {
  auto jobs = std::make_shared<std::vector<store::UnfinishedJob>>(s.jobs.TakeUnfinished());
  if (!jobs->empty()) spdlog::info("job store: {} accepted job(s) run again", jobs->size());
  ReplayFrom(s, jobs, 0, std::move(done));
}

void SubmitOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseSubmitRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  if (!s.jobs.enabled()) {
    return reply.Fail(Error(ErrorCode::kNotReady,
                            "this daemon keeps no job store (state_dir is \"none\"): submit "
                            "needs one; use generate or embed"));
  }
  // A submitted job's result keeps its text (and done fields), not its token
  // events: what only they carry is refused rather than lost.
  // Read as generate reads them; params that do not parse fail there, naming
  // what is wrong.
  if (request->op == "generate") {
    const auto params = ParseGenerateParams(request->params);
    if (params.ok() && params->logprobs) {
      return reply.Fail(
          InvalidField("logprobs",
                       "params.logprobs: a submitted job's result keeps its text only; "
                       "ask generate for log-probabilities"));
    }
    if (params.ok() && params->n != 1) {
      return reply.Fail(
          InvalidField("n",
                       "params.n: a submitted job's result keeps one text; submit one job "
                       "an answer, or ask generate for several"));
    }
    if (params.ok() && params->return_ids) {
      return reply.Fail(
          InvalidField("return_ids",
                       "params.return_ids: a submitted job's result keeps its text only; "
                       "ask generate for token ids"));
    }
  }
  JobIntake intake;
  intake.owner = reply.owner();
  intake.detached = true;
  // Answered once the job is on disk and queued; what the job's op answers
  // afterwards is dropped (the result is recorded instead).
  intake.accepted = [](const std::string& job, Responder& submit_reply) {
    submit_reply.Result({{"job", job}, {"state", "queued"}});
  };
  const auto op = *store::JobOpFromName(request->op);
  StartJob(s, op, request->params, std::move(reply), std::move(intake));
}

void StatusOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseJobRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  const std::string owner = reply.owner();
  s.jobs.StatusOf(request->job, owner, std::move(reply));
}

void ResultOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseResultRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  const std::string owner = reply.owner();
  s.jobs.ResultOf(request->job, owner, request->wait, std::move(reply));
}

void ForgetOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseJobRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  const std::string owner = reply.owner();
  s.jobs.Forget(request->job, owner, std::move(reply));
}

}  // namespace medq::daemon
