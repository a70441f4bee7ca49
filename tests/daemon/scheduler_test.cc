// The Scheduler against a fake worker (a WorkerPort that keeps what it is
// given and answers when the test says): admission, per-class slots,
// priorities and aging, cancel in every state, the memory hold-back, task
// completions and deadlines. The test's thread plays both threads, so every
// case is deterministic; no worker thread runs.
#include "daemon/loop/scheduler.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/handoff.h"
#include "daemon/worker/worker.h"
#include "daemon/worker/worker_port.h"

namespace medq::daemon {
namespace {

using namespace std::chrono_literals;

// A Worker whose thread never starts: only the argument a task's typed work
// gets (the tests' work ignores it).
struct IdleWorker {
  IdleWorker() {
    uv_loop_init(&loop);
    handoff = std::make_unique<Handoff>(&loop);
    worker = std::make_unique<Worker>(*handoff, WorkerOptions{});
  }
  ~IdleWorker() {
    worker.reset();
    handoff->Close();
    uv_run(&loop, UV_RUN_DEFAULT);  // lets the handle close
    uv_loop_close(&loop);
  }
  uv_loop_t loop;
  std::unique_ptr<Handoff> handoff;
  std::unique_ptr<Worker> worker;
};

class FakeWorker final : public WorkerPort {
 public:
  explicit FakeWorker(Worker& idle) : idle_(idle) {}

  void RunTask(WorkerTask task) override { tasks_.push_back(std::move(task)); }
  void StartGeneration(GenerationJob job) override { generations_.push_back(std::move(job)); }
  void StartEmbed(EmbedJob job) override { embeds_.push_back(std::move(job)); }
  void TrimIfIdle() override { ++trims; }
  void Wake() override { ++wakes; }
  int pending_embed_texts() const override { return 3; }
  int embed_batches_in_flight() const override { return 1; }

  // What the loop handed over, in order.
  std::vector<std::string> TaskIds() const {
    std::vector<std::string> ids;
    for (const WorkerTask& t : tasks_)
      ids.push_back(t.job);
    return ids;
  }
  std::vector<std::string> GenerationIds() const {
    std::vector<std::string> ids;
    for (const GenerationJob& g : generations_)
      ids.push_back(g.id);
    return ids;
  }
  size_t embeds() const { return embeds_.size(); }

  // The worker's turn for a task: its work runs, then, as the Worker does,
  // `run` is released and `finish` gets what it left with `report`.
  void RunTaskNow(const std::string& job, WorkerReport report = {}) {
    WorkerTask task = Take(tasks_, job, [](const WorkerTask& t) { return t.job; });
    TaskEnd end = task.run(idle_);
    end.report = std::move(report);
    task.run = nullptr;
    task.finish(std::move(end));
  }

  // The worker's side of a generation, as generations.h calls its sink.
  GenerationJob& Generation(const std::string& id) {
    for (GenerationJob& g : generations_) {
      if (g.id == id) return g;
    }
    FAIL("no generation " << id << " was handed to the worker");
    throw std::logic_error("unreachable");
  }
  bool CancelSet(const std::string& id) { return Generation(id).cancel->load(); }
  void Admit(const std::string& id) { Generation(id).sink.admitted(); }
  void Token(const std::string& id, const std::string& text) {
    Generation(id).sink.token(TokenEvent{text, {1}, {}});
  }
  void EndGeneration(const std::string& id, Result<GenerateDone> done, WorkerReport report = {}) {
    GenerationJob job = Take(generations_, id, [](const GenerationJob& g) { return g.id; });
    job.sink.done(std::move(done), std::move(report));
  }
  void EndGeneration(const std::string& id, FinishReason finish_reason) {
    GenerateDone done;
    done.finish_reason = finish_reason;
    EndGeneration(id, done);
  }

  EmbedJob& Embed(const std::string& id) {
    for (EmbedJob& e : embeds_) {
      if (e.id == id) return e;
    }
    FAIL("no embed request " << id << " was handed to the worker");
    throw std::logic_error("unreachable");
  }
  void EndEmbed(const std::string& id, Result<EmbedResult> result) {
    EmbedJob job = Take(embeds_, id, [](const EmbedJob& e) { return e.id; });
    job.sink.done(std::move(result), WorkerReport{});
  }

  int trims = 0;
  int wakes = 0;

 private:
  Worker& idle_;
  template <typename T, typename IdOf>
  static T Take(std::vector<T>& items, const std::string& id, IdOf id_of) {
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (id_of(*it) == id) {
        T item = std::move(*it);
        items.erase(it);
        return item;
      }
    }
    FAIL("the worker holds no " << id);
    throw std::logic_error("unreachable");
  }

  std::vector<WorkerTask> tasks_;
  std::vector<GenerationJob> generations_;
  std::vector<EmbedJob> embeds_;
};

// What a generation's client heard.
struct Heard {
  bool started = false;
  std::vector<std::string> tokens;
  std::optional<Result<GenerateDone>> done;
  int dones = 0;
};

struct Fixture {
  explicit Fixture(SchedulerOptions options = {})
      : worker(*idle.worker), scheduler(worker, options) {}

  JobSpec Spec(JobClass cls, Priority priority = Priority::kNormal) {
    JobSpec spec;
    spec.cls = cls;
    spec.op = cls == JobClass::kGenerate ? "generate" : cls == JobClass::kEmbed ? "embed" : "load";
    spec.priority = priority;
    return spec;
  }

  // Submits a generation whose client's events land in heard[id].
  Result<std::string> Generate(Priority priority = Priority::kNormal, JobSpec spec = {}) {
    if (spec.op.empty()) spec = Spec(JobClass::kGenerate, priority);
    auto h = std::make_shared<Heard>();
    GenerationCallbacks callbacks;
    callbacks.started = [h](const std::string&) { h->started = true; };
    callbacks.token = [h](TokenEvent event) { h->tokens.push_back(std::move(event.text)); };
    callbacks.done = [h](Result<GenerateDone> done) {
      h->done = std::move(done);
      ++h->dones;
    };
    auto id = scheduler.SubmitGeneration(std::move(spec), std::make_shared<const GenerateSpec>(),
                                         /*log_text=*/false, std::move(callbacks));
    if (id.ok()) heard[*id] = h;
    return id;
  }

  // Submits a model-class task whose work returns `result`; what reached its
  // `done` lands in task_done[id] (and task_dones[id] counts the calls).
  Result<std::string> Task(Priority priority = Priority::kNormal, Result<int> result = 1,
                           std::function<void()> then = nullptr) {
    auto out = std::make_shared<std::optional<Result<int>>>();
    auto calls = std::make_shared<int>(0);
    auto id = scheduler.Submit<int>(
        Spec(JobClass::kModel, priority), [result](Worker&) -> Result<int> { return result; },
        [out, calls, then](Result<int> r) {
          *out = std::move(r);
          ++*calls;
          if (then) then();
        });
    if (id.ok()) {
      task_done[*id] = out;
      task_dones[*id] = calls;
    }
    return id;
  }

  std::optional<JobInfo> Find(const std::string& id) {
    const QueueInfo q = scheduler.Describe();
    for (const auto* list : {&q.running, &q.waiting}) {
      for (const JobInfo& j : *list) {
        if (j.job == id) return j;
      }
    }
    return std::nullopt;
  }
  std::string StateOf(const std::string& id) {
    auto j = Find(id);
    return j ? j->state : "gone";
  }

  IdleWorker idle;
  FakeWorker worker;
  Scheduler scheduler;
  std::map<std::string, std::shared_ptr<Heard>> heard;
  std::map<std::string, std::shared_ptr<std::optional<Result<int>>>> task_done;
  std::map<std::string, std::shared_ptr<int>> task_dones;
};

SchedulerOptions Options(int max_queue, int max_concurrent, double aging_s = 60) {
  SchedulerOptions o;
  o.max_queue = max_queue;
  o.max_concurrent = max_concurrent;
  o.aging_s = aging_s;
  return o;
}

}  // namespace

TEST_CASE("a generation is starting until the worker admits it, then running",
          "[scheduler][hold-back]") {
  Fixture f(Options(5, 1));
  auto id = f.Generate();
  REQUIRE(id.ok());
  // It has its slot and its client heard `started`, but the worker holds it.
  CHECK(f.heard[*id]->started);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*id});
  CHECK(f.scheduler.running() == 1);
  CHECK(f.StateOf(*id) == "starting");
  CHECK_FALSE(f.scheduler.IsRunning(*id));
  const QueueInfo q = f.scheduler.Describe();
  REQUIRE(q.running.size() == 1);
  CHECK(q.running[0].job_class == "generate");
  CHECK(q.running[0].position == 0);

  f.worker.Admit(*id);
  CHECK(f.StateOf(*id) == "running");
  CHECK(f.scheduler.IsRunning(*id));
  f.worker.Token(*id, "Hello");
  f.worker.Token(*id, " world");
  CHECK(f.heard[*id]->tokens == std::vector<std::string>{"Hello", " world"});

  f.worker.EndGeneration(*id, FinishReason::kStop);
  CHECK(f.heard[*id]->dones == 1);
  REQUIRE(f.heard[*id]->done->ok());
  CHECK((*f.heard[*id]->done)->finish_reason == FinishReason::kStop);
  CHECK(f.StateOf(*id) == "gone");
  CHECK(f.scheduler.running() == 0);
  CHECK(f.scheduler.Describe().totals.processed == 1);
}

TEST_CASE("queue never says running for a generation held back for memory beside a running one",
          "[scheduler][hold-back]") {
  Fixture f(Options(5, 2));
  auto running = f.Generate();
  auto held = f.Generate();
  auto waiting = f.Generate();
  REQUIRE((running.ok() && held.ok() && waiting.ok()));
  f.worker.Admit(*running);
  // The worker admitted one; the other waits for memory. Both hold slots,
  // so a third waits for one.
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*running, *held});
  const QueueInfo q = f.scheduler.Describe();
  REQUIRE(q.running.size() == 2);
  for (const JobInfo& j : q.running)
    CHECK(j.state == (j.job == *running ? "running" : "starting"));
  REQUIRE(q.waiting.size() == 1);
  CHECK(q.waiting[0].job == *waiting);
  CHECK(q.waiting[0].state == "waiting");
  CHECK(f.scheduler.IsRunning(*running));
  CHECK_FALSE(f.scheduler.IsRunning(*held));
  CHECK_FALSE(f.scheduler.IsRunning(*waiting));

  // The worker's report while it holds it back (a model load, the memory)
  // reaches the view, and changes nothing of its state.
  WorkerReport report;
  report.memory = MemorySnapshot{1234, {}};
  f.worker.Generation(*held).sink.report(report);
  CHECK(f.scheduler.view().memory.rss_bytes == 1234);
  CHECK(f.StateOf(*held) == "starting");

  // The running one ends: its memory admits the held one, whose slot the
  // third does not get.
  f.worker.EndGeneration(*running, FinishReason::kLength);
  f.worker.Admit(*held);
  CHECK(f.StateOf(*held) == "running");
  CHECK(f.StateOf(*waiting) == "starting");
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*held, *waiting});
}

TEST_CASE("a generation the worker refuses while holding it back fails, never having run",
          "[scheduler][hold-back]") {
  Fixture f(Options(5, 1));
  auto id = f.Generate();
  auto next = f.Generate();
  REQUIRE((id.ok() && next.ok()));
  f.worker.EndGeneration(*id, Error(ErrorCode::kInsufficientMemory, "does not fit"));
  REQUIRE(f.heard[*id]->done.has_value());
  REQUIRE_FALSE(f.heard[*id]->done->ok());
  CHECK(f.heard[*id]->done->error().code == ErrorCode::kInsufficientMemory);
  CHECK(f.heard[*id]->tokens.empty());
  CHECK(f.scheduler.Describe().totals.processed == 1);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*next});
}

TEST_CASE("a class runs its own number of jobs at once, and past max_queue waiting is QUEUE_FULL",
          "[scheduler][admission]") {
  SchedulerOptions options = Options(2, 2);
  options.embed_max_concurrent = 1;
  Fixture f(options);
  auto g1 = f.Generate(), g2 = f.Generate(), g3 = f.Generate(), g4 = f.Generate();
  REQUIRE((g1.ok() && g2.ok() && g3.ok() && g4.ok()));
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*g1, *g2});
  CHECK(f.scheduler.waiting(JobClass::kGenerate) == 2);
  auto refused = f.Generate();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::kQueueFull);
  const Status room = f.scheduler.CheckRoom(JobClass::kGenerate);
  REQUIRE_FALSE(room.ok());
  CHECK(room.error().code == ErrorCode::kQueueFull);
  // A job past the limit (one accepted before a restart) is queued anyway.
  JobSpec past = f.Spec(JobClass::kGenerate);
  past.past_limit = true;
  CHECK(f.Generate(Priority::kNormal, std::move(past)).ok());
  CHECK(f.scheduler.waiting(JobClass::kGenerate) == 3);

  // The model class is one at a time, whatever the generations do.
  CHECK(f.scheduler.CheckRoom(JobClass::kModel).ok());
  auto t1 = f.Task(), t2 = f.Task();
  REQUIRE((t1.ok() && t2.ok()));
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*t1});
  CHECK(f.scheduler.waiting(JobClass::kModel) == 1);

  // The embed class, embed_max_concurrent (here 1) at once.
  auto embed = [&] {
    EmbedCallbacks callbacks;
    callbacks.started = [](const std::string&) {};
    callbacks.done = [](Result<EmbedResult>) {};
    return f.scheduler.SubmitEmbed(f.Spec(JobClass::kEmbed), std::make_shared<const EmbedSpec>(),
                                   std::move(callbacks));
  };
  auto e1 = embed(), e2 = embed();
  REQUIRE((e1.ok() && e2.ok()));
  CHECK(f.worker.embeds() == 1);
  CHECK(f.scheduler.running() == 2 + 1 + 1);
  CHECK(f.scheduler.waiting() == 3 + 1 + 1);
  CHECK(f.scheduler.pending_embed_texts() == 3);
  CHECK(f.scheduler.embed_batches_in_flight() == 1);

  // An end frees its class's slot only.
  f.worker.EndGeneration(*g1, FinishReason::kStop);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*g2, *g3});
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*t1});
  CHECK(f.worker.embeds() == 1);
  f.worker.EndEmbed(*e1, EmbedResult{});
  CHECK(f.worker.embeds() == 1);
  CHECK(f.worker.Embed(*e2).id == *e2);
  CHECK(f.worker.GenerationIds().size() == 2);
}

TEST_CASE("job ids are unique across the classes and start past set_next_id",
          "[scheduler][admission]") {
  Fixture f;
  f.scheduler.set_next_id(40);
  auto g = f.Generate();
  auto t = f.Task();
  REQUIRE((g.ok() && t.ok()));
  CHECK(*g == "j40");
  CHECK(*t == "j41");
  JobSpec spec = f.Spec(JobClass::kGenerate);
  spec.id = f.scheduler.TakeId();
  CHECK(spec.id == "j42");
  auto recorded = f.Generate(Priority::kNormal, std::move(spec));
  REQUIRE(recorded.ok());
  CHECK(*recorded == "j42");
}

TEST_CASE("waiting jobs start by priority, first come first within one", "[scheduler][priority]") {
  Fixture f(Options(10, 1));
  auto first = f.Generate();
  auto low = f.Generate(Priority::kLow);
  auto normal = f.Generate(Priority::kNormal);
  auto high = f.Generate(Priority::kHigh);
  auto normal2 = f.Generate(Priority::kNormal);
  const QueueInfo q = f.scheduler.Describe();
  REQUIRE(q.waiting.size() == 4);
  CHECK(q.waiting[0].job == *high);
  CHECK(q.waiting[0].position == 1);
  CHECK(q.waiting[1].job == *normal);
  CHECK(q.waiting[2].job == *normal2);
  CHECK(q.waiting[3].job == *low);
  CHECK(q.waiting[3].priority == "low");

  std::vector<std::string> order{*first};
  for (int i = 0; i < 4; ++i) {
    f.worker.EndGeneration(order.back(), FinishReason::kStop);
    order.push_back(f.worker.GenerationIds().at(0));
  }
  CHECK(order == std::vector<std::string>{*first, *high, *normal, *normal2, *low});
}

TEST_CASE("aging moves a low job that waited up past later normal ones", "[scheduler][priority]") {
  Fixture f(Options(10, 1, /*aging_s=*/0.05));
  auto first = f.Generate();
  auto low = f.Generate(Priority::kLow);
  std::this_thread::sleep_for(80ms);  // one aging step: low counts as normal
  auto normal = f.Generate(Priority::kNormal);
  f.scheduler.Tick();
  const QueueInfo q = f.scheduler.Describe();
  REQUIRE(q.waiting.size() == 2);
  CHECK(q.waiting[0].job == *low);
  CHECK(q.waiting[1].job == *normal);
  f.worker.EndGeneration(*first, FinishReason::kStop);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*low});
}

TEST_CASE("without aging a low job waits behind later normal ones", "[scheduler][priority]") {
  Fixture f(Options(10, 1, /*aging_s=*/60));
  auto first = f.Generate();
  auto low = f.Generate(Priority::kLow);
  std::this_thread::sleep_for(80ms);
  auto normal = f.Generate(Priority::kNormal);
  f.scheduler.Tick();
  f.worker.EndGeneration(*first, FinishReason::kStop);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*normal});
}

TEST_CASE("cancel: a waiting job leaves at once with CANCELLED", "[scheduler][cancel]") {
  Fixture f(Options(5, 1));
  auto running = f.Generate();
  auto waiting = f.Generate();
  auto task = f.Task();
  auto waiting_task = f.Task();
  REQUIRE((running.ok() && waiting.ok() && task.ok() && waiting_task.ok()));
  CHECK(f.scheduler.Cancel(*waiting) == Scheduler::Cancelled::kRemoved);
  REQUIRE(f.heard[*waiting]->done.has_value());
  REQUIRE_FALSE(f.heard[*waiting]->done->ok());
  CHECK(f.heard[*waiting]->done->error().code == ErrorCode::kCancelled);
  CHECK_FALSE(f.heard[*waiting]->started);
  CHECK(f.StateOf(*waiting) == "gone");
  // A waiting task's done hears it too, and it never reaches the worker.
  CHECK(f.scheduler.Cancel(*waiting_task) == Scheduler::Cancelled::kRemoved);
  REQUIRE(f.task_done[*waiting_task]->has_value());
  REQUIRE_FALSE(f.task_done[*waiting_task]->value().ok());
  CHECK(f.task_done[*waiting_task]->value().error().code == ErrorCode::kCancelled);
  CHECK(f.scheduler.Describe().totals.cancelled == 2);
  f.worker.RunTaskNow(*task);
  CHECK(f.worker.TaskIds().empty());
  // Unknown ids, and ids that already ended, are unknown.
  CHECK(f.scheduler.Cancel("j999") == Scheduler::Cancelled::kUnknown);
  CHECK(f.scheduler.Cancel(*waiting) == Scheduler::Cancelled::kUnknown);
}

TEST_CASE("cancel: a held-back generation is stopped by the worker before it runs",
          "[scheduler][cancel][hold-back]") {
  Fixture f(Options(5, 1));
  auto held = f.Generate();
  auto next = f.Generate();
  REQUIRE((held.ok() && next.ok()));
  CHECK(f.scheduler.Cancel(*held) == Scheduler::Cancelled::kStopping);
  CHECK(f.worker.CancelSet(*held));
  CHECK(f.worker.wakes == 0);  // the worker checks generations every step
  // Until the worker ends it, it keeps its slot, and is still not running.
  CHECK(f.StateOf(*held) == "starting");
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*held});
  f.worker.EndGeneration(*held, FinishReason::kCancelled);
  REQUIRE(f.heard[*held]->done.has_value());
  REQUIRE(f.heard[*held]->done->ok());
  CHECK((*f.heard[*held]->done)->finish_reason == FinishReason::kCancelled);
  const QueueInfo q = f.scheduler.Describe();
  CHECK(q.totals.cancelled == 1);
  CHECK(q.totals.processed == 0);
  CHECK(f.worker.GenerationIds() == std::vector<std::string>{*next});
}

TEST_CASE("cancel: a running generation stops at its next step and ends cancelled",
          "[scheduler][cancel]") {
  Fixture f(Options(5, 1));
  auto id = f.Generate();
  REQUIRE(id.ok());
  f.worker.Admit(*id);
  f.worker.Token(*id, "a");
  CHECK(f.scheduler.Cancel(*id) == Scheduler::Cancelled::kStopping);
  CHECK(f.worker.CancelSet(*id));
  // Asked twice, it is still stopping.
  CHECK(f.scheduler.Cancel(*id) == Scheduler::Cancelled::kStopping);
  f.worker.EndGeneration(*id, FinishReason::kCancelled);
  CHECK(f.heard[*id]->dones == 1);
  CHECK(f.heard[*id]->tokens == std::vector<std::string>{"a"});
  CHECK(f.scheduler.Describe().totals.cancelled == 1);
  CHECK(f.scheduler.running() == 0);
}

TEST_CASE("cancel: a running embed request wakes the worker, a running task is not cancelled",
          "[scheduler][cancel]") {
  Fixture f;
  std::optional<Result<EmbedResult>> embedded;
  EmbedCallbacks callbacks;
  callbacks.started = [](const std::string&) {};
  callbacks.done = [&](Result<EmbedResult> r) { embedded = std::move(r); };
  auto embed = f.scheduler.SubmitEmbed(f.Spec(JobClass::kEmbed),
                                       std::make_shared<const EmbedSpec>(), std::move(callbacks));
  REQUIRE(embed.ok());
  CHECK(f.scheduler.IsRunning(*embed));  // in the batcher: no hold-back
  CHECK(f.StateOf(*embed) == "running");
  CHECK(f.scheduler.Cancel(*embed) == Scheduler::Cancelled::kStopping);
  CHECK(f.worker.Embed(*embed).cancel->load());
  CHECK(f.worker.wakes == 1);
  f.worker.EndEmbed(*embed, Error(ErrorCode::kCancelled, "cancelled"));
  REQUIRE(embedded.has_value());
  REQUIRE_FALSE(embedded->ok());
  CHECK(embedded->error().code == ErrorCode::kCancelled);
  CHECK(f.scheduler.Describe().totals.cancelled == 1);

  auto task = f.Task();
  REQUIRE(task.ok());
  CHECK(f.scheduler.Cancel(*task) == Scheduler::Cancelled::kUnknown);
  CHECK(f.StateOf(*task) == "running");
}

TEST_CASE("cancel all running and drop all waiting (shutdown)", "[scheduler][cancel]") {
  Fixture f(Options(5, 2));
  auto admitted = f.Generate(), held = f.Generate(), waiting = f.Generate();
  REQUIRE((admitted.ok() && held.ok() && waiting.ok()));
  f.worker.Admit(*admitted);
  f.scheduler.DropAllWaiting(Error(ErrorCode::kNotReady, "shutting down"));
  REQUIRE(f.heard[*waiting]->done.has_value());
  REQUIRE_FALSE(f.heard[*waiting]->done->ok());
  CHECK(f.heard[*waiting]->done->error().code == ErrorCode::kNotReady);
  f.scheduler.CancelAllRunning();
  CHECK(f.worker.CancelSet(*admitted));
  CHECK(f.worker.CancelSet(*held));
}

TEST_CASE("a task's completion: report applied first, delivered once, slot freed, trim after",
          "[scheduler][task]") {
  Fixture f;
  int64_t seen_rss = 0;
  auto t1 = f.Task(Priority::kNormal, 7, [&] { seen_rss = f.scheduler.view().memory.rss_bytes; });
  auto t2 = f.Task(Priority::kNormal, Error(ErrorCode::kModelNotFound, "no such model"));
  REQUIRE((t1.ok() && t2.ok()));
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*t1});
  WorkerReport report;
  report.memory = MemorySnapshot{4096, {}};
  f.worker.RunTaskNow(*t1, report);
  CHECK(*f.task_dones[*t1] == 1);
  REQUIRE(f.task_done[*t1]->has_value());
  REQUIRE(f.task_done[*t1]->value().ok());
  CHECK(*f.task_done[*t1]->value() == 7);
  CHECK(seen_rss == 4096);
  CHECK(f.worker.trims == 1);
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*t2});
  CHECK(f.StateOf(*t2) == "running");

  // A task that fails: its error is its result, and the job ends.
  f.worker.RunTaskNow(*t2);
  CHECK(*f.task_dones[*t2] == 1);
  REQUIRE_FALSE(f.task_done[*t2]->value().ok());
  CHECK(f.task_done[*t2]->value().error().code == ErrorCode::kModelNotFound);
  CHECK(f.scheduler.Describe().totals.processed == 2);
  CHECK(f.scheduler.running() == 0);
}

TEST_CASE("what a task's work or completion throws ends the job and frees its slot",
          "[scheduler][task]") {
  Fixture f;
  std::optional<Result<int>> thrown;
  auto throwing_work = f.scheduler.Submit<int>(
      f.Spec(JobClass::kModel), [](Worker&) -> Result<int> { throw std::runtime_error("a bug"); },
      [&](Result<int> r) { thrown = std::move(r); });
  auto throwing_done =
      f.Task(Priority::kNormal, 1, [] { throw std::runtime_error("a bug in a completion"); });
  auto after = f.Task();
  REQUIRE((throwing_work.ok() && throwing_done.ok() && after.ok()));
  f.worker.RunTaskNow(*throwing_work);
  REQUIRE(thrown.has_value());
  REQUIRE_FALSE(thrown->ok());
  CHECK(thrown->error().code == ErrorCode::kInternal);
  CHECK_THAT(thrown->error().message, Catch::Contains("a bug"));
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*throwing_done});
  f.worker.RunTaskNow(*throwing_done);
  CHECK(*f.task_dones[*throwing_done] == 1);
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*after});
  f.worker.RunTaskNow(*after);
  CHECK(f.scheduler.Describe().totals.processed == 3);
}

TEST_CASE("without cleanup after-each a task is not followed by a trim", "[scheduler][task]") {
  SchedulerOptions options;
  options.trim_after_tasks = false;
  Fixture f(options);
  auto t = f.Task();
  REQUIRE(t.ok());
  f.worker.RunTaskNow(*t);
  CHECK(f.worker.trims == 0);
}

TEST_CASE("RunNow runs outside every queue and applies its report", "[scheduler][task]") {
  Fixture f(Options(5, 1));
  auto t = f.Task();  // the model class is busy; RunNow does not wait for it
  REQUIRE(t.ok());
  std::optional<Result<int>> got;
  size_t loaded_seen = 0;
  f.scheduler.RunNow<int>([](Worker&) -> Result<int> { return 5; },
                          [&](Result<int> r) {
                            loaded_seen = f.scheduler.view().loaded.size();
                            got = std::move(r);
                          });
  REQUIRE(f.worker.TaskIds() == std::vector<std::string>{*t, ""});
  CHECK(f.scheduler.running() == 1);
  WorkerReport report;
  report.loaded = std::vector<LoadedModelInfo>(1);
  f.worker.RunTaskNow("", report);
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK(**got == 5);
  CHECK(loaded_seen == 1);
  CHECK(f.worker.trims == 0);
  CHECK(f.scheduler.Describe().totals.processed == 0);
  CHECK(f.worker.TaskIds() == std::vector<std::string>{*t});
}

TEST_CASE("deadlines: QUEUE_TIMEOUT while waiting, TIMEOUT for a running generation",
          "[scheduler][admission]") {
  Fixture f(Options(5, 1));
  auto running = f.Generate();
  REQUIRE(running.ok());
  JobSpec queued = f.Spec(JobClass::kGenerate);
  queued.deadline = JobQueue::Clock::now() - 1ms;
  auto expired = f.Generate(Priority::kNormal, std::move(queued));
  REQUIRE(expired.ok());
  f.scheduler.Tick();
  REQUIRE(f.heard[*expired]->done.has_value());
  REQUIRE_FALSE(f.heard[*expired]->done->ok());
  CHECK(f.heard[*expired]->done->error().code == ErrorCode::kQueueTimeout);
  CHECK(f.scheduler.Describe().totals.timed_out == 1);

  f.worker.EndGeneration(*running, FinishReason::kStop);
  JobSpec timed = f.Spec(JobClass::kGenerate);
  timed.timeout_at = JobQueue::Clock::now() + 20ms;
  timed.timeout_s = 0.02;
  auto slow = f.Generate(Priority::kNormal, std::move(timed));
  REQUIRE(slow.ok());
  f.worker.Admit(*slow);
  f.scheduler.Tick();
  CHECK_FALSE(f.worker.CancelSet(*slow));
  std::this_thread::sleep_for(30ms);
  f.scheduler.Tick();
  CHECK(f.worker.CancelSet(*slow));
  // The worker stops it as for a cancel; its client hears TIMEOUT.
  f.worker.EndGeneration(*slow, FinishReason::kCancelled);
  REQUIRE(f.heard[*slow]->done.has_value());
  REQUIRE_FALSE(f.heard[*slow]->done->ok());
  CHECK(f.heard[*slow]->done->error().code == ErrorCode::kTimeout);
}

TEST_CASE("the owner of a job, waiting or running", "[scheduler][admission]") {
  Fixture f(Options(5, 1));
  JobSpec mine = f.Spec(JobClass::kGenerate);
  mine.owner = "uid:1000";
  auto running = f.Generate(Priority::kNormal, std::move(mine));
  JobSpec theirs = f.Spec(JobClass::kGenerate);
  theirs.owner = "uid:1001";
  auto waiting = f.Generate(Priority::kNormal, std::move(theirs));
  REQUIRE((running.ok() && waiting.ok()));
  CHECK(f.scheduler.OwnerOf(*running) == "uid:1000");
  CHECK(f.scheduler.OwnerOf(*waiting) == "uid:1001");
  CHECK_FALSE(f.scheduler.OwnerOf("j999").has_value());
  CHECK(MayActOnJob("uid:1000", "uid:1000"));
  CHECK_FALSE(MayActOnJob("uid:1000", "uid:1001"));
  CHECK(MayActOnJob("uid:1000", "uid:0"));
  CHECK_FALSE(MayActOnJob("", ""));
}

}  // namespace medq::daemon
