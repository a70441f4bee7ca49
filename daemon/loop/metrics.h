// The daemon's counters and histograms, rendered in the Prometheus text
// exposition format by the `metrics` op. Loop thread only. Never holds prompt
// or generated text: only counts and durations.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/messages.h"

namespace medq::daemon {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends the _bucket, _sum and _count series of `name`.
  void Render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  // A request ended: `outcome` is "ok" or its error code (e.g. "QUEUE_FULL").
  void CountRequest(std::string_view op, std::string_view outcome);
  void ObserveQueueWait(double seconds) { queue_wait_.Observe(seconds); }
  void ObserveFirstToken(double seconds) { first_token_.Observe(seconds); }
  void ObserveGeneration(double seconds, int64_t tokens);
  void ObserveModelLoad(double seconds) { model_load_.Observe(seconds); }
  void CountGpuOom() { ++gpu_oom_; }
  void CountCpuFallback() { ++cpu_fallbacks_; }
  void CountCleanup() { ++cleanups_; }
  // An embed request answered with its vectors (outcomes are in
  // medq_requests_total{op="embed"}).
  void ObserveEmbedRequest(double seconds, int64_t texts);
  // A forward pass of the embedding batcher.
  void ObserveEmbedBatch(int texts, double padding, double forming_s, double inference_s);

  // Gauges sampled at render time.
  struct Gauges {
    int queue_length = 0;
    int running_jobs = 0;
    int connections = 0;
    int loaded_models = 0;
    int64_t rss_bytes = 0;
    std::vector<std::pair<int, std::pair<int64_t, int64_t>>>
        device_bytes;  // index, allocated, reserved
    bool ready = false;
    int embed_waiting = 0;        // embed requests waiting for a slot in the batcher
    int embed_pending_texts = 0;  // texts in the batcher waiting for a batch
    int embed_in_flight = 0;      // embedding batches running
    StoreInfo store;              // the durable job store's size and rows
  };
  std::string Render(const Gauges& gauges) const;

 private:
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;
  Histogram queue_wait_;
  Histogram first_token_;
  Histogram latency_;
  Histogram model_load_;
  uint64_t tokens_ = 0;
  uint64_t gpu_oom_ = 0;
  uint64_t cpu_fallbacks_ = 0;
  uint64_t cleanups_ = 0;
  Histogram embed_latency_;
  Histogram embed_batch_size_;
  Histogram embed_padding_;
  Histogram embed_forming_;
  Histogram embed_inference_;
  uint64_t embed_texts_ = 0;
  uint64_t embed_batches_ = 0;
};

}  // namespace medq::daemon
