// The generate and cancel ops: a generation's way from the request through
// the job queue to the worker, and its events back to the client.
#include <spdlog/spdlog.h>

#include "common/generate_params.h"
#include "daemon/worker/generate_job.h"
#include "daemon/worker/memory.h"
#include "daemon/worker/memory_budget.h"
#include "daemon/worker/model_store.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kDeviceErrorThreshold = 3;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One log line's worth of patient text, JSON-quoted so that newlines and
// control characters in it cannot forge log lines. Only with log_prompts.
std::string QuotedForLog(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string PromptForLog(const GenerateParams& p) {
  nlohmann::ordered_json prompt;
  if (!p.system.empty()) prompt["system"] = p.system;
  if (p.prompt) prompt["prompt"] = *p.prompt;
  if (p.messages) prompt["messages"] = *p.messages;
  if (p.prompt_ids) prompt["prompt_ids"] = *p.prompt_ids;
  return QuotedForLog(prompt);
}

// Loop thread: the job's result arrived from the worker.
void FinishGenerate(DaemonState& s, const std::string& job_id, Result<json> result) {
  auto it = s.sessions.find(job_id);
  if (it == s.sessions.end()) return;
  std::shared_ptr<GenerateSession> session = std::move(it->second);
  s.sessions.erase(it);
  JobQueue::Outcome outcome = JobQueue::Outcome::kFailed;
  if (result.ok()) {
    s.consecutive_internal_errors = 0;
    s.last_memory = result->at("memory").get<MemorySnapshot>();
    s.loaded_models = result->at("loaded");
    json done = std::move(result->at("done"));
    const double queued_ms =
        std::chrono::duration<double, std::milli>(session->started - session->submitted).count();
    s.metrics.ObserveQueueWait(queued_ms / 1000);
    s.metrics.ObserveGeneration(MsSince(session->submitted) / 1000,
                                done["usage"]["completion_tokens"].get<int64_t>());
    if (double load_ms = result->value("model_load_ms", 0.0); load_ms > 0) {
      s.metrics.ObserveModelLoad(load_ms / 1000);
    }
    if (result->value("fell_back_to_cpu", false)) s.metrics.CountCpuFallback();
    if (result->value("cleaned_up", false)) s.metrics.CountCleanup();
    done["timings"]["queued_ms"] = queued_ms;
    done["timings"]["total_ms"] = MsSince(session->submitted);
    outcome = done["finish_reason"] == "cancelled" ? JobQueue::Outcome::kCancelled
                                                   : JobQueue::Outcome::kCompleted;
    session->reply->Done(std::move(done));
  } else {
    spdlog::info("job {}: {} ({})", job_id, ErrorCodeName(result.error().code),
                 result.error().message);
    if (result.error().code == ErrorCode::kGpuOom) s.metrics.CountGpuOom();
    // A device that keeps failing is reported, not hidden: health turns
    // "degraded" with the reason, so that an operator (or systemd) restarts.
    if (result.error().code == ErrorCode::kInternal &&
        ++s.consecutive_internal_errors == kDeviceErrorThreshold) {
      spdlog::error(
          "{} generations in a row failed with internal errors; the device may be "
          "unusable. Last: {}. Restart medqd if this persists.",
          kDeviceErrorThreshold, result.error().message);
      s.warnings.push_back("device errors: " + std::to_string(kDeviceErrorThreshold) +
                           " generations in a row failed; last: " + result.error().message);
    }
    session->reply->Fail(result.error());
  }
  s.jobs.Finish(job_id, outcome);
}

// Loop thread: the job may run now.
void StartGenerate(DaemonState& s, const std::string& job_id,
                   std::shared_ptr<GenerateSession> session, std::shared_ptr<GenerateSpec> spec) {
  s.sessions[job_id] = session;
  session->started = Clock::now();
  session->reply->Event("started", {{"job", job_id}});
  spdlog::info("job {}: generating with {} (max_tokens {})", job_id, spec->model_name,
               spec->params.max_tokens ? std::to_string(*spec->params.max_tokens) : "default");
  // Patient data: only with log_prompts (main warns at start that it is on).
  const bool log_text = s.config.log_prompts;
  if (log_text) spdlog::info("job {}: prompt {}", job_id, PromptForLog(spec->params));
  Worker& worker = s.worker;
  ModelStore& models = s.models;
  const bool cleanup_after = s.config.cleanup == "after-each";
  const BudgetPolicy budget{s.config.max_gpu_memory_mb << 20, s.config.test_fault_injection};
  auto work = [&s, &worker, &models, spec, job_id, cancel = session->cancel, cleanup_after, budget,
               log_text]() -> Result<json> {
    std::string output;  // kept only for log_prompts
    auto emit = [&s, &worker, job_id, log_text, &output](std::string text,
                                                         std::vector<int32_t> ids) {
      if (log_text) output += text;
      worker.PostToLoop([&s, job_id, text = std::move(text), ids = std::move(ids)]() {
        auto found = s.sessions.find(job_id);
        if (found == s.sessions.end()) return;
        GenerateSession& run = *found->second;
        if (!run.first_token_seen) {
          run.first_token_seen = true;
          s.metrics.ObserveFirstToken(MsSince(run.submitted) / 1000);
        }
        json fields = {{"text", text}};
        if (!ids.empty()) fields["ids"] = ids;
        found->second->reply->Event("token", std::move(fields));
      });
    };
    const int loads_before = models.loads();
    // Load first, and show the model in `health` while it generates.
    const auto t_load = Clock::now();
    auto model = models.Acquire(spec->model_name, spec->model_dir, spec->adapter_dir);
    if (!model.ok()) {
      if (cleanup_after) ReleaseCachedMemory();
      return std::move(model).error();
    }
    worker.PostToLoop([&s, loaded = DescribeLoaded(models)] { s.loaded_models = loaded; });
    const LoadedModel& loaded = **model;
    auto admit = [&loaded, &models, &budget](int64_t prompt_tokens, int64_t max_tokens) {
      return AdmitRun(engine::Info(*loaded.model), models, prompt_tokens, max_tokens, budget);
    };
    auto done = RunGenerate(
        loaded, MsSince(t_load), spec->params, *cancel, emit, [&worker] { worker.Heartbeat(); },
        admit);
    if (log_text && (done.ok() || !output.empty())) {
      spdlog::info("job {}: output {}", job_id, QuotedForLog(output));
    }
    // Whatever the outcome, the run's memory is freed before the next job.
    if (cleanup_after) ReleaseCachedMemory();
    if (!done.ok()) return done;
    json out = {{"done", std::move(*done)},
                {"memory", TakeMemorySnapshot()},
                {"loaded", DescribeLoaded(models)},
                {"cleaned_up", cleanup_after}};
    if (models.loads() != loads_before && !models.loaded().empty()) {
      out["model_load_ms"] = models.loaded().front().load_ms;
      out["fell_back_to_cpu"] = models.loaded().front().fell_back_to_cpu;
    }
    return out;
  };
  worker.Submit(std::move(work), [&s, job_id](Result<json> result) {
    FinishGenerate(s, job_id, std::move(result));
  });
}

}  // namespace

void GenerateOp(DaemonState& s, const Request& req, Responder reply) {
  auto params = ParseGenerateParams(req.params);
  if (!params.ok()) return reply.Fail(params.error());
  auto spec = std::make_shared<GenerateSpec>();
  spec->params = std::move(*params);
  spec->model_name = spec->params.model.empty() ? s.config.model : spec->params.model;
  if (spec->model_name.empty()) {
    return reply.Fail(Error(ErrorCode::kModelNotFound,
                            "no model named in params.model and no default model configured "
                            "(medqd --model NAME)"));
  }
  auto dir = s.resolver.Resolve(spec->model_name, "model");
  if (!dir.ok()) return reply.Fail(dir.error());
  spec->model_dir = *dir;
  if (!spec->params.adapter.empty()) {
    auto adapter = s.resolver.Resolve(spec->params.adapter, "adapter");
    if (!adapter.ok()) return reply.Fail(adapter.error());
    spec->adapter_dir = *adapter;
  }

  const double timeout_s = std::min(
      s.config.queue_timeout_s, spec->params.queue_timeout_s.value_or(s.config.queue_timeout_s));
  auto session = std::make_shared<GenerateSession>();
  session->reply = std::make_shared<Responder>(std::move(reply));
  JobQueue::Options options;
  options.priority = *PriorityFromName(spec->params.priority);
  options.deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  options.on_position = [reply = session->reply](const std::string& job_id, int position,
                                                 int waiting, double wait_s) {
    reply->Event("queued", {{"job", job_id},
                            {"position", position},
                            {"queue_length", waiting},
                            {"estimated_wait_s", wait_s}});
  };
  auto job = s.jobs.Submit(
      "generate", std::move(options),
      [&s, session, spec](const std::string& job_id) { StartGenerate(s, job_id, session, spec); },
      [reply = session->reply](const Error& why) { reply->Fail(why); });
  if (!job.ok()) return session->reply->Fail(job.error());
  // A client that goes away cancels its job, waiting or running.
  session->reply->OnClientGone([&s, id = *job] {
    if (s.jobs.CancelWaiting(id)) return;
    if (auto it = s.sessions.find(id); it != s.sessions.end()) *it->second->cancel = true;
  });
}

void CancelOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"job"}); !st.ok()) return reply.Fail(st.error());
  auto it = req.params.find("job");
  if (it == req.params.end() || !it->is_string()) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.job must be a job id string"));
  }
  const std::string job = it->get<std::string>();
  if (s.jobs.CancelWaiting(job)) return reply.Result({{"job", job}, {"state", "cancelled"}});
  if (auto session = s.sessions.find(job); session != s.sessions.end()) {
    *session->second->cancel = true;
    return reply.Result({{"job", job}, {"state", "cancelling"}});
  }
  reply.Fail(Error(ErrorCode::kInvalidRequest,
                   "no waiting or running job \"" + job + "\"; see `medq queue`"));
}

}  // namespace medq::daemon
