#include "daemon/worker/generations.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "common/elapsed.h"
#include "daemon/worker/choices.h"
#include "daemon/worker/memory.h"

namespace medq::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// The done fields of a generation that ended before producing anything.
engine::GenerateResult NothingRun(const Generation& g, engine::FinishReason finish) {
  engine::GenerateResult r;
  r.finish = finish;
  r.prompt_tokens = static_cast<int>(g.request().prompt.size());
  return r;
}

}  // namespace

void Generations::Start(GenerationJob job) {
  const int loads_before = models_.loads();
  const auto t_load = Clock::now();
  const GenerateSpec& spec = *job.spec;
  auto model = models_.Acquire(spec.model_name, spec.model_dir, spec.adapter_dir);
  const double load_ms = MsSince(t_load);
  if (models_.loads() != loads_before && !models_.loaded().empty()) {
    loaded_this_step_ = true;
    last_load_ = {models_.loaded().front().load_ms, models_.loaded().front().fell_back_to_cpu};
  }
  if (!model.ok()) return Fail(job.sink, std::move(model).error());
  if (Status st = RequireKind((*model)->name, (*model)->kind(), ModelKind::kGeneration); !st.ok()) {
    return Fail(job.sink, st.error());
  }
  job.sink.report(MakeReport(models_, /*measure=*/false));
  GenerationSink sink = job.sink;
  const int n = spec.params.n;
  if (n <= 1) {
    auto g = Generation::Prepare(std::move(job), **model, load_ms);
    if (!g.ok()) return Fail(sink, std::move(g).error());
    waiting_.push_back(std::move(*g));
    return;
  }
  // Every choice is prepared before any waits: what one refuses (a prompt
  // too long, a schema) all would, and the job fails once.
  std::vector<GenerationSink> sinks = SplitSink(sink, n);
  std::vector<std::unique_ptr<Generation>> choices;
  for (int i = 0; i < n; ++i) {
    GenerationJob part = job;
    part.sink = std::move(sinks[static_cast<size_t>(i)]);
    part.choice = i;
    auto g = Generation::Prepare(std::move(part), **model, load_ms);
    if (!g.ok()) return Fail(sink, std::move(g).error());
    choices.push_back(std::move(*g));
  }
  for (auto& g : choices)
    waiting_.push_back(std::move(g));
}

void Generations::Fail(const GenerationSink& sink, Error error) {
  const bool cleaned = policy_.cleanup_after_each && !busy();
  if (cleaned) ReleaseCachedMemory();
  WorkerReport report = MakeReport(models_, /*measure=*/true);
  report.cleaned_up = cleaned;
  if (loaded_this_step_) report.model_load = last_load_;
  loaded_this_step_ = false;
  sink.done(std::move(error), std::move(report));
}

engine::Batch& Generations::BatchFor(const std::shared_ptr<const engine::Model>& model) {
  std::unique_ptr<engine::Batch>& batch = batches_[model.get()];
  if (!batch) batch = std::make_unique<engine::Batch>(model, policy_.batch);
  return *batch;
}

void Generations::Admit() {
  // First come, first admitted: once one waits for memory, none behind it is
  // admitted (a stream of small runs must not starve a large one); those
  // behind it are still checked, so that a run that cannot fit is refused
  // at once rather than after the wait.
  bool blocked = false;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Generation& g = **it;
    if (g.cancelled()) {
      GenerateDone done = g.Finish(NothingRun(g, engine::FinishReason::kCancelled));
      End(std::move(*it), std::move(done));
      it = waiting_.erase(it);
      continue;
    }
    RunningUsage running;
    for (const auto& [seq, r] : running_) {
      if (r->info().device != g.info().device) continue;
      const MemoryEstimate e = r->Estimate();
      running.total_bytes += e.total();
      running.workspace_bytes += e.workspace_bytes;
    }
    const Admission a = AdmitRun(g.info(), models_, g.Estimate(), running, policy_.budget);
    if (a.verdict == Verdict::kRefuse) {
      End(std::move(*it), RefusalError(a));
      it = waiting_.erase(it);
      continue;
    }
    if (a.verdict == Verdict::kWait || blocked) {
      blocked = true;
      ++it;
      continue;
    }
    std::unique_ptr<Generation> next = std::move(*it);
    it = waiting_.erase(it);
    auto seq = BatchFor(next->model()).Add(next->request());
    if (!seq.ok()) {
      End(std::move(next), std::move(seq).error());
      continue;
    }
    if (next->job().sink.admitted) next->job().sink.admitted();
    next->sequence = *seq;
    running_.emplace(*seq, std::move(next));
  }
}

void Generations::EndRunning(engine::SequenceId seq, const engine::GenerateResult& result) {
  auto it = running_.find(seq);
  if (it == running_.end()) return;
  std::unique_ptr<Generation> g = std::move(it->second);
  running_.erase(it);
  GenerateDone done = g->Finish(result);
  End(std::move(g), std::move(done));
}

void Generations::FailBatch(const engine::Model* model, const Error& error) {
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second->model().get() == model) {
      End(std::move(it->second), error);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
}

void Generations::StepBatch(engine::Batch& batch) {
  // Cancelled sequences leave before the step: no token is spent on them.
  for (auto it = running_.begin(); it != running_.end();) {
    auto next = std::next(it);
    if (it->second->model().get() == &batch.model() && it->second->cancelled()) {
      EndRunning(it->first, batch.Remove(it->first));
    }
    it = next;
  }
  if (batch.empty()) return;
  auto steps = batch.Step();
  if (!steps.ok()) {
    spdlog::warn("decode step failed for {} sequence(s): {}", running_.size(),
                 steps.error().message);
    FailBatch(&batch.model(), steps.error());
    return;
  }
  for (const engine::SequenceStep& s : *steps) {
    auto it = running_.find(s.id);
    if (it == running_.end()) continue;
    const bool go_on = !s.has_token || it->second->OnToken(s.token, s.logprobs);
    if (s.finished) {
      EndRunning(s.id, s.result);
    } else if (!go_on) {
      // A stop string ended the text: the sequence leaves the batch now.
      EndRunning(s.id, batch.Remove(s.id));
    }
  }
}

void Generations::End(std::unique_ptr<Generation> g, Result<GenerateDone> done) {
  ended_.push_back(Ended{std::move(g), std::move(done)});
}

void Generations::Step() {
  Admit();
  for (auto it = batches_.begin(); it != batches_.end();) {
    StepBatch(*it->second);
    it = it->second->empty() ? batches_.erase(it) : std::next(it);
  }
  Admit();  // what ended in this step may have made room
  if (!ended_.empty()) Report();
}

void Generations::FailAll(const Error& error) {
  for (std::unique_ptr<Generation>& g : waiting_)
    End(std::move(g), error);
  waiting_.clear();
  for (auto& [seq, g] : running_)
    End(std::move(g), error);
  running_.clear();
  batches_.clear();
  Report();
}

void Generations::Report() {
  const bool cleaned = policy_.cleanup_after_each && !busy();
  // Whatever the outcome, the runs' memory is freed before the reports
  // measure it, once nothing else runs.
  if (cleaned) ReleaseCachedMemory();
  WorkerReport report = MakeReport(models_, /*measure=*/true);
  report.cleaned_up = cleaned;
  if (loaded_this_step_) report.model_load = last_load_;
  loaded_this_step_ = false;
  std::vector<Ended> ended;
  ended.swap(ended_);
  for (Ended& e : ended) {
    e.generation->job().sink.done(std::move(e.done), report);
  }
}

}  // namespace medq::daemon
