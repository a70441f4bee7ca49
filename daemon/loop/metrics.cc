#include "daemon/loop/metrics.h"

#include <cstdio>

namespace medq::daemon {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += " ";
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += " ";
  out += type;
  out += "\n";
}

void Sample(std::string& out, const std::string& name, double value) {
  out += name + " " + Num(value) + "\n";
}

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                            2.5,   5,    10,    30,   60,  120,  300};
// Embedding requests and batches take milliseconds.
const std::vector<double> kShortBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                          0.1,    0.25,  0.5,    1,     2.5,  5,     10};
const std::vector<double> kBatchSizeBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
const std::vector<double> kFractionBounds = {0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i])
    ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string& out, const std::string& name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + Num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : queue_wait_(kLatencyBounds),
      first_token_(kLatencyBounds),
      latency_(kLatencyBounds),
      model_load_({0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120}),
      embed_latency_(kShortBounds),
      embed_batch_size_(kBatchSizeBounds),
      embed_padding_(kFractionBounds),
      embed_forming_(kShortBounds),
      embed_inference_(kShortBounds) {}

void Metrics::ObserveEmbedRequest(double seconds, int64_t texts) {
  embed_latency_.Observe(seconds);
  embed_texts_ += static_cast<uint64_t>(texts);
}

void Metrics::ObserveEmbedBatch(int texts, double padding, double forming_s, double inference_s) {
  embed_batch_size_.Observe(texts);
  embed_padding_.Observe(padding);
  embed_forming_.Observe(forming_s);
  embed_inference_.Observe(inference_s);
  ++embed_batches_;
}

void Metrics::CountRequest(std::string_view op, std::string_view outcome) {
  ++requests_[{std::string(op), std::string(outcome)}];
}

void Metrics::ObserveGeneration(double seconds, int64_t tokens) {
  latency_.Observe(seconds);
  tokens_ += static_cast<uint64_t>(tokens);
}

std::string Metrics::Render(const Gauges& g) const {
  std::string out;
  Header(out, "medq_requests_total", "counter", "Requests by op and outcome (ok or error code).");
  for (const auto& [key, n] : requests_) {
    out += "medq_requests_total{op=\"" + key.first + "\",outcome=\"" + key.second + "\"} " +
           std::to_string(n) + "\n";
  }
  Header(out, "medq_queue_wait_seconds", "histogram", "Time generations waited in the queue.");
  queue_wait_.Render(out, "medq_queue_wait_seconds");
  Header(out, "medq_time_to_first_token_seconds", "histogram",
         "From submission to the first token of a generation.");
  first_token_.Render(out, "medq_time_to_first_token_seconds");
  Header(out, "medq_generation_seconds", "histogram",
         "From submission to the end of a generation.");
  latency_.Render(out, "medq_generation_seconds");
  Header(out, "medq_model_load_seconds", "histogram", "Model load times.");
  model_load_.Render(out, "medq_model_load_seconds");
  Header(out, "medq_tokens_generated_total", "counter", "Tokens generated.");
  Sample(out, "medq_tokens_generated_total", static_cast<double>(tokens_));
  Header(out, "medq_gpu_oom_total", "counter", "Jobs and loads that ran out of GPU memory.");
  Sample(out, "medq_gpu_oom_total", static_cast<double>(gpu_oom_));
  Header(out, "medq_cpu_fallback_total", "counter",
         "Models loaded on the CPU after the GPU ran out of memory.");
  Sample(out, "medq_cpu_fallback_total", static_cast<double>(cpu_fallbacks_));
  Header(out, "medq_memory_cleanups_total", "counter", "Memory cleanups run.");
  Sample(out, "medq_memory_cleanups_total", static_cast<double>(cleanups_));
  Header(out, "medq_embed_request_seconds", "histogram",
         "From submission to the vectors of an embed request.");
  embed_latency_.Render(out, "medq_embed_request_seconds");
  Header(out, "medq_embed_texts_total", "counter", "Texts embedded.");
  Sample(out, "medq_embed_texts_total", static_cast<double>(embed_texts_));
  Header(out, "medq_embed_batches_total", "counter", "Embedding forward passes run.");
  Sample(out, "medq_embed_batches_total", static_cast<double>(embed_batches_));
  Header(out, "medq_embed_batch_size", "histogram", "Texts per embedding forward pass.");
  embed_batch_size_.Render(out, "medq_embed_batch_size");
  Header(out, "medq_embed_batch_padding_ratio", "histogram",
         "Fraction of an embedding batch's token slots that were padding.");
  embed_padding_.Render(out, "medq_embed_batch_padding_ratio");
  Header(out, "medq_embed_batch_forming_seconds", "histogram",
         "From a batch's oldest text reaching the batcher to the batch's forward pass.");
  embed_forming_.Render(out, "medq_embed_batch_forming_seconds");
  Header(out, "medq_embed_batch_inference_seconds", "histogram",
         "Time of one embedding forward pass.");
  embed_inference_.Render(out, "medq_embed_batch_inference_seconds");
  Header(out, "medq_embed_queue_size", "gauge",
         "Embedding work waiting: requests for a slot in the batcher, texts for a batch.");
  out += "medq_embed_queue_size{stage=\"requests\"} " + std::to_string(g.embed_waiting) + "\n";
  out += "medq_embed_queue_size{stage=\"texts\"} " + std::to_string(g.embed_pending_texts) + "\n";
  Header(out, "medq_embed_batches_in_flight", "gauge", "Embedding forward passes running.");
  Sample(out, "medq_embed_batches_in_flight", g.embed_in_flight);
  if (g.store.enabled) {
    Header(out, "medq_store_bytes", "gauge", "Size of the job store on disk, with its log.");
    Sample(out, "medq_store_bytes", static_cast<double>(g.store.bytes));
    Header(out, "medq_store_jobs", "gauge", "Jobs in the job store, by state.");
    for (const auto& [state, n] : {std::pair{"queued", g.store.queued},
                                   {"done", g.store.done},
                                   {"failed", g.store.failed},
                                   {"cancelled", g.store.cancelled},
                                   {"timed_out", g.store.timed_out}}) {
      out += std::string("medq_store_jobs{state=\"") + state + "\"} " + std::to_string(n) + "\n";
    }
  }
  Header(out, "medq_queue_length", "gauge", "Jobs waiting.");
  Sample(out, "medq_queue_length", g.queue_length);
  Header(out, "medq_running_jobs", "gauge", "Jobs running.");
  Sample(out, "medq_running_jobs", g.running_jobs);
  Header(out, "medq_connections", "gauge", "Open client connections.");
  Sample(out, "medq_connections", g.connections);
  Header(out, "medq_loaded_models", "gauge", "Models in memory.");
  Sample(out, "medq_loaded_models", g.loaded_models);
  Header(out, "medq_ready", "gauge", "1 when the daemon can generate now.");
  Sample(out, "medq_ready", g.ready ? 1 : 0);
  Header(out, "medq_host_resident_bytes", "gauge", "Resident set size of medqd.");
  Sample(out, "medq_host_resident_bytes", static_cast<double>(g.rss_bytes));
  Header(out, "medq_device_allocated_bytes", "gauge", "CUDA memory held by tensors.");
  for (const auto& [index, bytes] : g.device_bytes) {
    out += "medq_device_allocated_bytes{device=\"cuda:" + std::to_string(index) + "\"} " +
           std::to_string(bytes.first) + "\n";
  }
  Header(out, "medq_device_reserved_bytes", "gauge", "CUDA memory held by the caching allocator.");
  for (const auto& [index, bytes] : g.device_bytes) {
    out += "medq_device_reserved_bytes{device=\"cuda:" + std::to_string(index) + "\"} " +
           std::to_string(bytes.second) + "\n";
  }
  return out;
}

}  // namespace medq::daemon
