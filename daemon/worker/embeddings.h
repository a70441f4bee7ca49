// The embedding batcher on the worker thread: texts of embed requests from
// every client, grouped into forward passes. Worker thread only (but for
// pending_texts(), which any thread may read).
//
// A request the loop starts (its class had a free slot, see
// loop/scheduler.h) is prepared at once: its model acquired (loaded on first
// use), each text lowercased when the model asks for it, tokenized with the
// special tokens and cut to the model's max_seq_length (or refused with
// truncate false). Its texts then wait in one pending list, oldest first.
//
// A batch is due when max_batch texts are pending, or when the oldest has
// waited batch_timeout. Each Step() then ends cancelled requests, and runs
// at most one batch when one is due: the oldest pending text with the texts
// of the same model nearest to it in length (embed_batching.h), so that
// padding stays under its limit. A request larger than one batch goes in
// several, and its vectors are put back in order. A request whose last text
// is embedded ends through its sink with its vectors (cut to `dimensions`,
// then normalized when asked) and a typed report; the batch's figures ride
// on the report of a request in it, for the loop's metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/messages.h"
#include "common/requests.h"
#include "common/result.h"
#include "daemon/worker/embed_batching.h"
#include "daemon/worker/model_store.h"
#include "daemon/worker/report.h"

namespace medq::daemon {

struct EmbedSpec {
  EmbedRequest request;
  std::string model_name;  // as the request named it (or the default)
  std::filesystem::path model_dir;
};

// An embed request's way back to the loop. Embeddings calls it on the worker
// thread; the sink the loop hands WorkerPort::StartEmbed is called on the
// loop thread (the Worker posts each call there, worker_port.h).
struct EmbedSink {
  // Mid-run: a model load, a batch's figures.
  std::function<void(WorkerReport report)> report;
  // The end, exactly once: the vectors, or the error the request fails with.
  std::function<void(Result<EmbedResult> result, WorkerReport report)> done;
};

struct EmbedJob {
  std::string id;
  std::shared_ptr<const EmbedSpec> spec;
  std::shared_ptr<const std::atomic<bool>> cancel;  // set by the loop
  EmbedSink sink;
};

struct EmbedPolicy {
  BatchLimits limits;
  std::chrono::milliseconds batch_timeout{10};
  bool cleanup_after_each = true;
};

class Embeddings {
 public:
  using Clock = std::chrono::steady_clock;

  // `others_busy`: whether other work runs on the worker (generations), in
  // which case memory is not released after a batch.
  Embeddings(ModelStore& models, EmbedPolicy policy, std::function<bool()> others_busy)
      : models_(models), policy_(std::move(policy)), others_busy_(std::move(others_busy)) {}

  // Takes a request the loop started. Failures (model, texts) end it at once.
  void Start(EmbedJob job);

  bool busy() const { return !requests_.empty(); }
  // When the next batch is due (now or earlier when max_batch texts are
  // pending); time_point::max() when nothing is pending.
  Clock::time_point NextDue() const;
  // Ends cancelled requests, then runs one batch when it is due at `now`, or
  // whenever texts are pending with `flush` (shutdown).
  void Step(Clock::time_point now, bool flush);
  // Ends every request with `error` (after a bug threw out of Step).
  void FailAll(const Error& error);

  // Texts waiting for a batch, and batches running (0 or 1). Any thread
  // (metrics).
  int pending_texts() const { return pending_count_.load(std::memory_order_relaxed); }
  int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  struct Request {
    EmbedJob job;
    std::shared_ptr<const engine::EmbeddingModel> model;
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;  // kept: the store may unload
    std::string model_name;                                 // as loaded, for messages
    bool normalize = false;
    int64_t dims = 0;
    Clock::time_point admitted;
    std::optional<Clock::time_point> first_batch;
    double load_ms = 0;
    double embed_ms = 0;
    size_t remaining = 0;  // texts not yet embedded
    EmbedResult result;
  };
  struct PendingText {
    Request* request;
    size_t index;  // in the request's input
    std::vector<int32_t> ids;
    Clock::time_point arrived;
  };

  Result<std::unique_ptr<Request>> Prepare(EmbedJob& job);
  void RunBatch(Clock::time_point now);
  void EndCancelled();
  // Ends `id`'s request (its pending texts dropped) with `result`.
  void End(const std::string& id, Result<EmbedResult> result);
  void Report();
  void UpdateCount() { pending_count_.store(static_cast<int>(pending_.size())); }

  ModelStore& models_;
  EmbedPolicy policy_;
  std::function<bool()> others_busy_;
  std::map<std::string, std::unique_ptr<Request>> requests_;  // by job id
  std::deque<PendingText> pending_;                           // oldest first
  std::atomic<int> pending_count_{0};
  std::atomic<int> in_flight_{0};
  struct Ended {
    EmbedSink sink;
    Result<EmbedResult> result;
  };
  std::vector<Ended> ended_;              // reported at the end of the step
  std::vector<EmbedBatchStats> batches_;  // this step's, for the next report
  std::optional<ModelLoadReport> load_;   // a load since the last report
  EmbedSink report_sink_;  // a request of the last batch: carries figures no end carries
};

}  // namespace medq::daemon
