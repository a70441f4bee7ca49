#include "daemon/loop/scheduler.h"

#include <unistd.h>

#include <exception>

#include "common/elapsed.h"
#include "common/generate_params.h"

namespace medq::daemon {
namespace {

constexpr std::string_view kClassNames[kJobClasses] = {"generate", "model", "embed"};

Error TimedOut(const std::string& id, double seconds) {
  return Error(ErrorCode::kTimeout, "job " + id + " did not finish within its timeout_s of " +
                                        FormatSeconds(seconds) +
                                        " s; it was stopped, and what it produced is kept");
}

}  // namespace

Scheduler::Scheduler(WorkerPort& worker, SchedulerOptions options)
    : worker_(worker),
      options_(options),
      queues_{JobQueue(options.max_queue, options.max_concurrent, options.aging_s),
              JobQueue(options.max_queue, 1, options.aging_s),
              JobQueue(options.max_queue, options.embed_max_concurrent, options.aging_s)} {}

JobQueue::Options Scheduler::QueueOptions(JobSpec& spec) {
  JobQueue::Options options;
  options.priority = spec.priority;
  options.deadline = spec.deadline;
  options.on_position = std::move(spec.on_position);
  options.id = spec.id.empty() ? TakeId() : std::move(spec.id);
  options.past_limit = spec.past_limit;
  options.owner = std::move(spec.owner);
  options.timeout_at = spec.timeout_at;
  options.timeout_s = spec.timeout_s;
  if (spec.timeout_at) deadlines_[options.id] = Deadline{*spec.timeout_at, spec.timeout_s};
  return options;
}

Result<std::string> Scheduler::SubmitErased(JobSpec spec, ErasedWork work,
                                            std::function<void(const Error&)> drop) {
  const JobClass cls = spec.cls;
  JobQueue::Options options = QueueOptions(spec);
  return QueueOf(cls).Submit(
      std::move(spec.op), std::move(options),
      [this, cls, work = std::move(work)](const std::string& id) { StartTask(id, cls, work); },
      [drop = std::move(drop)](const Error& why) {
        GuardCallback("a job's drop", [&] { drop(why); });
      });
}

void Scheduler::StartTask(const std::string& id, JobClass cls, ErasedWork work) {
  running_[id] = Running{cls, nullptr, nullptr, nullptr};
  WorkerTask task;
  task.job = id;
  task.run = std::move(work);
  task.finish = [this, id](TaskEnd end) {
    GuardCallback("a job's completion", [&] {
      Apply(end.report);
      if (end.deliver) end.deliver();
    });
    // The completion holds the client's Responder: released before the slot
    // is (an unanswered one, from a completion that threw, replies INTERNAL).
    end.deliver = nullptr;
    Finish(id, end.ok ? JobQueue::Outcome::kCompleted : JobQueue::Outcome::kFailed);
    // Like a generation, a task gives its memory back under `after-each`.
    if (options_.trim_after_tasks) worker_.TrimIfIdle();
  };
  worker_.RunTask(std::move(task));
}

Result<std::string> Scheduler::SubmitGeneration(JobSpec spec,
                                                std::shared_ptr<const GenerateSpec> generate,
                                                bool log_text, GenerationCallbacks callbacks) {
  auto shared = std::make_shared<GenerationCallbacks>(std::move(callbacks));
  JobQueue::Options options = QueueOptions(spec);
  // The wait estimate's measure of the job (the context may cap an unset
  // max_tokens lower; the loop does not know the prompt's length).
  options.tokens = generate->params.max_tokens.value_or(kDefaultMaxTokens) * generate->params.n;
  return QueueOf(JobClass::kGenerate)
      .Submit(
          std::move(spec.op), std::move(options),
          [this, generate, log_text, shared](const std::string& id) {
            StartGeneration(id, generate, log_text, shared);
          },
          [shared](const Error& why) {
            GuardCallback("a job's drop", [&] { shared->done(why); });
          });
}

void Scheduler::StartGeneration(const std::string& id, std::shared_ptr<const GenerateSpec> spec,
                                bool log_text, std::shared_ptr<GenerationCallbacks> callbacks) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  Running& running = running_[id];
  running = Running{JobClass::kGenerate, cancel, callbacks, nullptr};
  running.admitted = false;  // `queue` says "starting" until the worker admits it
  GuardCallback("a generation's start", [&] { callbacks->started(id); });
  GenerationSink sink;
  sink.admitted = [this, id] { OnAdmitted(id); };
  sink.token = [this, id](TokenEvent event) { OnToken(id, std::move(event)); };
  sink.report = [this](WorkerReport report) {
    GuardCallback("a worker report", [&] { Apply(report); });
  };
  sink.done = [this, id](Result<GenerateDone> done, WorkerReport report) {
    OnGenerationDone(id, std::move(done), std::move(report));
  };
  worker_.StartGeneration(GenerationJob{id, std::move(spec), cancel, log_text, std::move(sink)});
}

Result<std::string> Scheduler::SubmitEmbed(JobSpec spec, std::shared_ptr<const EmbedSpec> embed,
                                           EmbedCallbacks callbacks) {
  auto shared = std::make_shared<EmbedCallbacks>(std::move(callbacks));
  JobQueue::Options options = QueueOptions(spec);
  return QueueOf(JobClass::kEmbed)
      .Submit(
          std::move(spec.op), std::move(options),
          [this, embed, shared](const std::string& id) { StartEmbed(id, embed, shared); },
          [shared](const Error& why) {
            GuardCallback("a job's drop", [&] { shared->done(why); });
          });
}

void Scheduler::StartEmbed(const std::string& id, std::shared_ptr<const EmbedSpec> spec,
                           std::shared_ptr<EmbedCallbacks> callbacks) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  running_[id] = Running{JobClass::kEmbed, cancel, nullptr, callbacks};
  GuardCallback("an embed request's start", [&] { callbacks->started(id); });
  EmbedSink sink;
  sink.report = [this](WorkerReport report) {
    GuardCallback("a worker report", [&] { Apply(report); });
  };
  sink.done = [this, id](Result<EmbedResult> result, WorkerReport report) {
    OnEmbedDone(id, std::move(result), std::move(report));
  };
  worker_.StartEmbed(EmbedJob{id, std::move(spec), cancel, std::move(sink)});
}

void Scheduler::OnEmbedDone(const std::string& id, Result<EmbedResult> result,
                            WorkerReport report) {
  auto it = running_.find(id);
  if (it == running_.end() || !it->second.embed) return;
  std::shared_ptr<EmbedCallbacks> callbacks = it->second.embed;
  if (auto timed_out = timed_out_.find(id); timed_out != timed_out_.end()) {
    if (!result.ok() && result.error().code == ErrorCode::kCancelled) {
      result = TimedOut(id, timed_out->second);
    }
    timed_out_.erase(timed_out);
  }
  JobQueue::Outcome outcome = JobQueue::Outcome::kCompleted;
  if (!result.ok()) {
    outcome = result.error().code == ErrorCode::kCancelled ? JobQueue::Outcome::kCancelled
                                                           : JobQueue::Outcome::kFailed;
  }
  GuardCallback("an embed request's completion", [&] {
    Apply(report);
    callbacks->done(std::move(result));
  });
  Finish(id, outcome);
}

void Scheduler::OnAdmitted(const std::string& id) {
  auto it = running_.find(id);
  if (it == running_.end() || !it->second.generation) return;
  it->second.admitted = true;
}

void Scheduler::OnToken(const std::string& id, TokenEvent event) {
  auto it = running_.find(id);
  if (it == running_.end() || !it->second.generation) return;
  // One event a token, or the ids it carries (text held back by a stop
  // string or a split character comes later with more).
  QueueOf(JobClass::kGenerate)
      .AddProgress(id, std::max<int64_t>({1, static_cast<int64_t>(event.ids.size()),
                                          static_cast<int64_t>(event.logprobs.size())}));
  GuardCallback("a token event", [&] { it->second.generation->token(std::move(event)); });
}

void Scheduler::OnGenerationDone(const std::string& id, Result<GenerateDone> done,
                                 WorkerReport report) {
  auto it = running_.find(id);
  if (it == running_.end() || !it->second.generation) return;
  std::shared_ptr<GenerationCallbacks> callbacks = it->second.generation;
  if (auto timed_out = timed_out_.find(id); timed_out != timed_out_.end()) {
    // Stopped by Tick for its deadline (a generation that reached its own
    // end meanwhile keeps it).
    if (done.ok() && done->finish_reason == FinishReason::kCancelled)
      done = TimedOut(id, timed_out->second);
    timed_out_.erase(timed_out);
  }
  JobQueue::Outcome outcome = JobQueue::Outcome::kFailed;
  if (done.ok()) {
    outcome = done->finish_reason == FinishReason::kCancelled ? JobQueue::Outcome::kCancelled
                                                              : JobQueue::Outcome::kCompleted;
    QueueOf(JobClass::kGenerate)
        .ObserveDecode(done->usage.completion_tokens, done->timings.decode_ms / 1000);
  }
  GuardCallback("a generation's completion", [&] {
    Apply(report);
    callbacks->done(std::move(done));
  });
  Finish(id, outcome);
}

void Scheduler::Apply(const WorkerReport& report) {
  if (report.memory) view_.memory = *report.memory;
  if (report.loaded) view_.loaded = *report.loaded;
  if (report.decode_graph_failure) view_.decode_graph_failure = *report.decode_graph_failure;
  if (on_report_) on_report_(report);
}

void Scheduler::Finish(const std::string& id, JobQueue::Outcome outcome) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  const JobClass cls = it->second.cls;
  running_.erase(it);
  deadlines_.erase(id);
  QueueOf(cls).Finish(id, outcome);
}

Scheduler::Cancelled Scheduler::Cancel(const std::string& job) {
  for (JobQueue& q : queues_) {
    if (q.CancelWaiting(job)) return Cancelled::kRemoved;
  }
  auto it = running_.find(job);
  if (it == running_.end() || !it->second.cancel) return Cancelled::kUnknown;
  *it->second.cancel = true;
  // The worker may sleep until the request's batch is due: wake it, so that
  // the request ends now.
  if (it->second.cls == JobClass::kEmbed) worker_.Wake();
  return Cancelled::kStopping;
}

std::optional<std::string> Scheduler::OwnerOf(const std::string& job) const {
  for (const JobQueue& q : queues_) {
    if (auto owner = q.OwnerOf(job)) return owner;
  }
  return std::nullopt;
}

bool MayActOnJob(const std::string& owner, const std::string& who) {
  return (!who.empty() && owner == who) || who == "uid:0" ||
         who == "uid:" + std::to_string(getuid());
}

void Scheduler::CancelAllRunning() {
  for (auto& [id, r] : running_) {
    if (r.cancel) *r.cancel = true;
  }
}

void Scheduler::DropAllWaiting(const Error& why) {
  for (JobQueue& q : queues_)
    q.DropAllWaiting(why);
}

void Scheduler::Tick() {
  // The queues first: a job still waiting past its deadline leaves there.
  for (JobQueue& q : queues_)
    q.Tick();
  const auto now = JobQueue::Clock::now();
  for (auto it = deadlines_.begin(); it != deadlines_.end();) {
    if (now < it->second.at) {
      ++it;
      continue;
    }
    if (auto running = running_.find(it->first);
        running != running_.end() && running->second.cancel) {
      spdlog::info("job {}: past its timeout_s of {} s; stopping it", it->first,
                   FormatSeconds(it->second.seconds));
      timed_out_[it->first] = it->second.seconds;
      *running->second.cancel = true;
      if (running->second.cls == JobClass::kEmbed) worker_.Wake();
    }
    it = deadlines_.erase(it);
  }
}

int Scheduler::running() const {
  int n = 0;
  for (const JobQueue& q : queues_)
    n += q.running();
  return n;
}

int Scheduler::waiting() const {
  int n = 0;
  for (const JobQueue& q : queues_)
    n += q.waiting();
  return n;
}

void Scheduler::set_max_queue(int max_queue) {
  for (JobQueue& q : queues_)
    q.set_max_queue(max_queue);
}

QueueInfo Scheduler::Describe() const {
  QueueInfo info;
  info.max_queue = max_queue();
  for (int c = 0; c < kJobClasses; ++c) {
    QueueInfo q = queues_[c].Describe();
    for (JobInfo& j : q.running) {
      j.job_class = std::string(kClassNames[c]);
      if (auto r = running_.find(j.job); r != running_.end() && !r->second.admitted) {
        j.state = "starting";
      }
      info.running.push_back(std::move(j));
    }
    for (JobInfo& j : q.waiting) {
      j.job_class = std::string(kClassNames[c]);
      info.waiting.push_back(std::move(j));
    }
    info.totals.processed += q.totals.processed;
    info.totals.rejected += q.totals.rejected;
    info.totals.timed_out += q.totals.timed_out;
    info.totals.cancelled += q.totals.cancelled;
  }
  return info;
}

}  // namespace medq::daemon
