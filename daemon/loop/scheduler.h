// The loop thread's side of the boundary with the worker: the one component
// that admits, starts, finishes and cancels work. Loop thread only.
//
// Work comes in classes, each with its own queue and concurrency:
//   generate  generations; `max_concurrent` run at once (1, the default, is
//             the generation lock), decoded together in the worker's batch;
//   model     loads, unloads, tokenize, detokenize, apply-template and
//             cleanup-memory; one at a time, run by the worker between two
//             steps of the running generations, so they never wait for a
//             generation to end;
//   embed     embed requests; `embed_max_concurrent` at once in the worker's
//             batcher, which groups their texts into forward passes between
//             two steps of the running generations.
// A job waits for a slot in its class (priorities, aging, deadlines,
// positions and QUEUE_FULL as job_queue.h says), then:
//   - a task (Submit) runs its typed work on the worker and its typed
//     completion on the loop;
//   - a generation (SubmitGeneration) joins the worker's step loop, sends
//     tokens as it goes, and ends with its done fields or an error.
//   - an embed request (SubmitEmbed) joins the worker's batcher and ends with
//     its vectors or an error.
// Either way the Scheduler catches what is thrown around the work (on the
// worker) and around the completion (on the loop), applies the worker's
// typed report (memory, loaded models) to its view before the completion
// runs, and finishes the job in its queue exactly once, so that no slot is
// ever held by a job that has ended.
//
// It reaches the worker only through a WorkerPort (worker/worker_port.h),
// whose answers come back on the loop thread: the daemon's is the Worker,
// a unit test's a fake.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/messages.h"
#include "common/result.h"
#include "daemon/loop/job_queue.h"
#include "daemon/uv_guard.h"
#include "daemon/worker/generation.h"
#include "daemon/worker/report.h"
#include "daemon/worker/typed_task.h"
#include "daemon/worker/worker_port.h"

namespace medq::daemon {

enum class JobClass { kGenerate = 0, kModel = 1, kEmbed = 2 };
inline constexpr int kJobClasses = 3;

struct JobSpec {
  JobClass cls = JobClass::kModel;
  std::string op;  // for `queue` and the logs
  Priority priority = Priority::kNormal;
  std::optional<JobQueue::Clock::time_point> deadline;  // QUEUE_TIMEOUT after it
  JobQueue::PositionFn on_position;                     // may be empty
  // Set for a recorded job (daemon/loop/durable_jobs.h): its id, from
  // TakeId(); empty: the scheduler numbers it.
  std::string id;
  bool past_limit = false;  // see JobQueue::Options
  // The client the job is for (ReplyChannel::owner()); empty for the
  // daemon's own work. Only its owner (and MayActOnJob's privileged users)
  // may cancel it.
  std::string owner;
  // The request's deadline (timeout_s): waiting past it, the job leaves with
  // TIMEOUT; running past it, it is stopped at its next step and ends with
  // TIMEOUT (a generation's tokens so far have been delivered). Checked by
  // Tick, so up to one tick late.
  std::optional<JobQueue::Clock::time_point> timeout_at;
  double timeout_s = 0;  // for the message
};

// Whether the client `who` ("uid:N", "http") may act on a job of `owner`:
// its own, or any as root or the daemon's own user (docs/protocol.md,
// "Durable jobs"). The one rule for cancel, status, result and forget.
bool MayActOnJob(const std::string& owner, const std::string& who);

struct SchedulerOptions {
  int max_queue = 5;       // waiting jobs per class
  int max_concurrent = 1;  // generations running at once
  double aging_s = 60;
  // Under `cleanup = after-each`: memory is trimmed after each task too.
  bool trim_after_tasks = true;
  int embed_max_concurrent = 64;  // embed requests in the batcher at once
};

// What a generation's client hears. Each is called on the loop thread.
struct GenerationCallbacks {
  std::function<void(const std::string& job)> started;
  std::function<void(TokenEvent event)> token;
  // Exactly once: the done fields, or the error it failed with, or why it
  // left the queue without running.
  std::function<void(Result<GenerateDone> done)> done;
};

// What an embed request's client hears, on the loop thread.
struct EmbedCallbacks {
  std::function<void(const std::string& job)> started;
  // Exactly once: the vectors, or the error, or why it left the queue.
  std::function<void(Result<EmbedResult> result)> done;
};

// The loop's view of the worker, from its last report.
struct WorkerView {
  MemorySnapshot memory;
  std::vector<LoadedModelInfo> loaded;
  std::string decode_graph_failure;  // WorkerReport's, once set
};

class Scheduler {
 public:
  template <typename R>
  using Work = WorkerWork<R>;  // runs on the worker (worker/typed_task.h)
  template <typename R>
  using Done = WorkDone<R>;  // runs on the loop

  // `worker` outlives the Scheduler, and calls back into it until then.
  Scheduler(WorkerPort& worker, SchedulerOptions options);

  // Queues a task of spec.cls: `work` runs on the worker when the class has
  // a slot, then `done` on the loop with its result. `done` is called exactly
  // once: also with the error when the job leaves the queue without running.
  // Returns the job id, or QUEUE_FULL.
  template <typename R>
  Result<std::string> Submit(JobSpec spec, Work<R> work, Done<R> done);

  // Queues a generation (class generate).
  Result<std::string> SubmitGeneration(JobSpec spec, std::shared_ptr<const GenerateSpec> generate,
                                       bool log_text, GenerationCallbacks callbacks);

  // Queues an embed request (class embed).
  Result<std::string> SubmitEmbed(JobSpec spec, std::shared_ptr<const EmbedSpec> embed,
                                  EmbedCallbacks callbacks);

  // Runs `work` on the worker at its next turn, outside every queue, and
  // `done` with its result (maintenance: memory refreshes, idle unloads).
  template <typename R>
  void RunNow(Work<R> work, Done<R> done);

  enum class Cancelled { kRemoved, kStopping, kUnknown };
  // Removes a waiting job (its client gets CANCELLED) or asks a running
  // generation to stop at its next step. Running tasks are short and end
  // by themselves (kUnknown).
  Cancelled Cancel(const std::string& job);
  // The owner of a waiting or running job (JobSpec::owner); nullopt when no
  // queue holds it.
  std::optional<std::string> OwnerOf(const std::string& job) const;
  // (An embed request in the batcher is kStopping too: it ends with CANCELLED
  // before its next batch.)
  // Asks every running generation and embed request to stop (drain timeout).
  void CancelAllRunning();
  // Drops every waiting job with `why` (shutdown).
  void DropAllWaiting(const Error& why);
  // Deadlines and aging; call periodically.
  void Tick();

  // A job id for a job submitted later with JobSpec::id. Ids are "j" and a
  // number, unique across the classes, and never reused once recorded:
  // set_next_id() starts them past the job store's.
  std::string TakeId() { return "j" + std::to_string(next_id_++); }
  void set_next_id(uint64_t next) { next_id_ = std::max(next_id_, next); }
  // QUEUE_FULL when a job of `cls` submitted now would be refused.
  Status CheckRoom(JobClass cls) { return QueueOf(cls).CheckRoom(); }

  int running() const;
  // True while `job` runs (in any class), not while it waits, nor while the
  // worker still prepares or holds back a generation it was given.
  bool IsRunning(const std::string& job) const {
    auto it = running_.find(job);
    return it != running_.end() && it->second.admitted;
  }
  int waiting() const;
  int waiting(JobClass cls) const { return queues_[static_cast<int>(cls)].waiting(); }
  // Texts in the worker's embedding batcher (any thread may ask the worker).
  int pending_embed_texts() const { return worker_.pending_embed_texts(); }
  int embed_batches_in_flight() const { return worker_.embed_batches_in_flight(); }
  QueueInfo Describe() const;
  const WorkerView& view() const { return view_; }
  void set_max_queue(int max_queue);
  int max_queue() const { return queues_[0].max_queue(); }
  // Called with every report, after the view is updated (metrics).
  void set_on_report(std::function<void(const WorkerReport&)> fn) { on_report_ = std::move(fn); }

 private:
  using ErasedWork = std::function<TaskEnd(Worker& worker)>;

  struct Running {
    JobClass cls;
    std::shared_ptr<std::atomic<bool>> cancel;  // generations and embeds
    std::shared_ptr<GenerationCallbacks> generation;
    std::shared_ptr<EmbedCallbacks> embed;
    // A generation holds its slot (and its client has heard `started`) from
    // its start, but runs only once the worker admitted it into a batch
    // (GenerationSink::admitted): until then `queue` says "starting", never
    // "running".
    bool admitted = true;
  };

  // The queue options of `spec` (its position callback moved out) with the
  // next job id.
  JobQueue::Options QueueOptions(JobSpec& spec);
  Result<std::string> SubmitErased(JobSpec spec, ErasedWork work,
                                   std::function<void(const Error&)> drop);
  void StartTask(const std::string& id, JobClass cls, ErasedWork work);
  void StartGeneration(const std::string& id, std::shared_ptr<const GenerateSpec> spec,
                       bool log_text, std::shared_ptr<GenerationCallbacks> callbacks);
  void StartEmbed(const std::string& id, std::shared_ptr<const EmbedSpec> spec,
                  std::shared_ptr<EmbedCallbacks> callbacks);
  void OnEmbedDone(const std::string& id, Result<EmbedResult> result, WorkerReport report);
  void OnAdmitted(const std::string& id);
  void OnToken(const std::string& id, TokenEvent event);
  void OnGenerationDone(const std::string& id, Result<GenerateDone> done, WorkerReport report);
  void Apply(const WorkerReport& report);
  void Finish(const std::string& id, JobQueue::Outcome outcome);
  JobQueue& QueueOf(JobClass cls) { return queues_[static_cast<int>(cls)]; }

  WorkerPort& worker_;
  SchedulerOptions options_;
  std::array<JobQueue, kJobClasses> queues_;
  uint64_t next_id_ = 1;
  std::map<std::string, Running> running_;
  // Jobs with a deadline (JobSpec::timeout_at), by id, until it passes or
  // the job ends; and the running ones Tick stopped for it.
  struct Deadline {
    JobQueue::Clock::time_point at;
    double seconds = 0;
  };
  std::map<std::string, Deadline> deadlines_;
  std::map<std::string, double> timed_out_;
  WorkerView view_;
  std::function<void(const WorkerReport&)> on_report_;
};

template <typename R>
Result<std::string> Scheduler::Submit(JobSpec spec, Work<R> work, Done<R> done) {
  auto shared_done = std::make_shared<Done<R>>(std::move(done));
  return SubmitErased(std::move(spec), EraseWork<R>(std::move(work), shared_done),
                      [shared_done](const Error& why) { (*shared_done)(why); });
}

template <typename R>
void Scheduler::RunNow(Work<R> work, Done<R> done) {
  WorkerTask task;
  task.run = EraseWork<R>(std::move(work), std::make_shared<Done<R>>(std::move(done)));
  task.finish = [this](TaskEnd end) {
    GuardCallback("a maintenance completion", [&] {
      Apply(end.report);
      if (end.deliver) end.deliver();
    });
  };
  worker_.RunTask(std::move(task));
}

}  // namespace medq::daemon
