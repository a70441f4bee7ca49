#include "daemon/worker/worker.h"

#include <pthread.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/engine/engine.h"
#include "daemon/worker/memory.h"

namespace medq::daemon {

using Clock = std::chrono::steady_clock;

namespace {

Error StartFailed(const std::exception& e) {
  return Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what());
}

// A generation's sink whose calls, made on the worker thread, run `sink`'s on
// the loop thread.
GenerationSink PostedToLoop(Handoff& handoff, GenerationSink sink) {
  auto loop = std::make_shared<const GenerationSink>(std::move(sink));
  GenerationSink posted;
  posted.admitted = [&handoff, loop] {
    handoff.PostToLoop([loop] {
      if (loop->admitted) loop->admitted();
    });
  };
  posted.token = [&handoff, loop](TokenEvent event) {
    handoff.PostToLoop(
        [loop, event = std::move(event)]() mutable { loop->token(std::move(event)); });
  };
  posted.report = [&handoff, loop](WorkerReport report) {
    handoff.PostToLoop([loop, report = std::move(report)]() mutable {
      if (loop->report) loop->report(std::move(report));
    });
  };
  posted.done = [&handoff, loop](Result<GenerateDone> done, WorkerReport report) {
    handoff.PostToLoop([loop, done = std::move(done), report = std::move(report)]() mutable {
      loop->done(std::move(done), std::move(report));
    });
  };
  return posted;
}

// The same for an embed request's sink.
EmbedSink PostedToLoop(Handoff& handoff, EmbedSink sink) {
  auto loop = std::make_shared<const EmbedSink>(std::move(sink));
  EmbedSink posted;
  posted.report = [&handoff, loop](WorkerReport report) {
    handoff.PostToLoop([loop, report = std::move(report)]() mutable {
      if (loop->report) loop->report(std::move(report));
    });
  };
  posted.done = [&handoff, loop](Result<EmbedResult> result, WorkerReport report) {
    handoff.PostToLoop([loop, result = std::move(result), report = std::move(report)]() mutable {
      loop->done(std::move(result), std::move(report));
    });
  };
  return posted;
}

}  // namespace

Worker::Worker(Handoff& handoff, WorkerOptions options)
    : handoff_(handoff),
      threads_(options.threads),
      batch_wait_(options.batch_wait),
      max_concurrent_(options.max_concurrent),
      models_(std::move(options.load)),
      generations_(models_, std::move(options.generation)),
      embeddings_(models_, std::move(options.embed), [this] { return generations_.busy(); }) {}

Worker::~Worker() {
  StopAndJoin();
}

void Worker::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Worker::StopAndJoin() {
  if (!thread_.joinable()) return;
  handoff_.StopWorker();
  thread_.join();
}

void Worker::RunTask(WorkerTask task) {
  handoff_.PostToWorker([this, task = std::move(task)]() mutable {
    TaskEnd end;
    try {
      end = task.run(*this);  // catches what the typed work throws
    } catch (const std::exception& e) {
      spdlog::error("job {}: {}", task.job, e.what());
    }
    try {
      end.report = MakeReport(models_, /*measure=*/true);
    } catch (const std::exception& e) {
      spdlog::error("measuring memory failed: {}", e.what());
    }
    // `task` and `end` hold the job's completion, and with it the client's
    // Responder: both go back to the loop, to be released there. Released
    // here, after the loop let go of its references, an unanswered Responder
    // (a completion that threw) would write its INTERNAL reply from this
    // thread, racing the loop on the connection.
    handoff_.PostToLoop([task = std::move(task), end = std::move(end)]() mutable {
      task.run = nullptr;
      task.finish(std::move(end));
    });
  });
}

void Worker::StartGeneration(GenerationJob job) {
  job.sink = PostedToLoop(handoff_, std::move(job.sink));
  handoff_.PostToWorker([this, job = std::move(job)]() mutable {
    const GenerationSink fallback = job.sink;
    const std::string id = job.id;
    try {
      generations_.Start(std::move(job));
    } catch (const std::exception& e) {
      spdlog::error("job {}: starting the generation failed: {}", id, e.what());
      fallback.done(StartFailed(e), WorkerReport{});
    }
  });
}

void Worker::StartEmbed(EmbedJob job) {
  job.sink = PostedToLoop(handoff_, std::move(job.sink));
  handoff_.PostToWorker([this, job = std::move(job)]() mutable {
    const EmbedSink fallback = job.sink;
    const std::string id = job.id;
    try {
      embeddings_.Start(std::move(job));
    } catch (const std::exception& e) {
      spdlog::error("job {}: starting the embed request failed: {}", id, e.what());
      fallback.done(StartFailed(e), WorkerReport{});
    }
  });
}

// Like a generation, a task gives its memory back under `after-each`. The
// trim runs after the task's completion, which freed the reply; it waits
// while generations run (they trim when the last one ends).
void Worker::TrimIfIdle() {
  handoff_.PostToWorker([this] {
    try {
      if (!generations_.busy()) ReleaseCachedMemory();
    } catch (const std::exception& e) {
      spdlog::error("trim after a task failed: {}", e.what());
    }
  });
}

void Worker::Wake() {
  handoff_.PostToWorker([] {});
}

void Worker::Run() {
  pthread_setname_np(pthread_self(), "medq-worker");
  engine::InitWorkerThread(threads_);
  bool stopped = false;
  while (true) {
    // Running generations: no wait. Pending embeddings: until their batch is
    // due. Otherwise until a task comes. Once stopped, batches go at once.
    const auto wait_until =
        generations_.busy() || stopped ? Clock::time_point::min() : embeddings_.NextDue();
    std::deque<Handoff::Closure> tasks = handoff_.TakeTasks(wait_until, &stopped);
    busy_ = true;
    Heartbeat();
    const bool none_running = !generations_.busy();
    RunTasks(tasks);
    if (none_running && generations_.busy()) GatherStarts(&stopped);
    if (generations_.busy()) {
      const Handoff::WakeOnce one_wake(handoff_);  // the step's tokens, together
      try {
        generations_.Step();
      } catch (const std::exception& e) {
        // A bug: every generation is ended with INTERNAL rather than left
        // waiting for a reply that would never come.
        spdlog::error("generation step failed with an unexpected exception: {}", e.what());
        generations_.FailAll(
            Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
      }
      Heartbeat();
    }
    if (embeddings_.busy()) {
      const Handoff::WakeOnce one_wake(handoff_);
      try {
        embeddings_.Step(Clock::now(), /*flush=*/stopped);
      } catch (const std::exception& e) {
        spdlog::error("embedding step failed with an unexpected exception: {}", e.what());
        embeddings_.FailAll(
            Error(ErrorCode::kInternal, std::string("unexpected failure: ") + e.what()));
      }
      Heartbeat();
    }
    busy_ = false;
    if (stopped && tasks.empty() && !generations_.busy() && !embeddings_.busy()) break;
  }
}

// Generations sent together reach the worker a little apart: each is read,
// checked and queued by the loop in turn, and on a small CPU the engine's
// threads, once a step runs, leave the loop and the clients little time.
// Were the first one's steps begun at once, the others' prompts would be
// read in its later steps, and its tokens would wait for them: steps of
// prompt reading in the middle of its output. So a generation that finds
// none running waits for more, and those that come start with it: their
// prompts are read together in the first step, as one batch. The wait ends
// once batch_wait_ has passed with no other generation coming (each one
// that comes starts it anew, so the whole wait is at most max_concurrent_
// times batch_wait_), once max_concurrent_ have started (no more can come),
// or on stop. Other tasks that come meanwhile run in their order.
void Worker::GatherStarts(bool* stopped) {
  if (batch_wait_.count() <= 0 || max_concurrent_ <= 1) return;
  auto until = Clock::now() + batch_wait_;
  while (!*stopped && generations_.count() < max_concurrent_) {
    std::deque<Handoff::Closure> tasks = handoff_.TakeTasks(until, stopped);
    if (tasks.empty()) return;  // the wait is over
    const int before = generations_.count();
    RunTasks(tasks);
    // Another came: more may be on their way.
    if (generations_.count() > before) until = Clock::now() + batch_wait_;
  }
}

void Worker::RunTasks(std::deque<Handoff::Closure>& tasks) {
  // The port's tasks catch what their work throws; nothing escapes them.
  for (Handoff::Closure& task : tasks) {
    task();
    Heartbeat();
  }
}

int64_t Worker::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Worker::Heartbeat() {
  last_beat_ms_ = NowMs();
}

bool Worker::Responsive(std::chrono::milliseconds max_silence) const {
  return !busy_ || NowMs() - last_beat_ms_ <= max_silence.count();
}

}  // namespace medq::daemon
