#include "bench/engine/batch_bench.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "bench/engine/resident_child.h"
#include "daemon/engine/batch.h"
#include "daemon/engine/engine.h"

namespace medq::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Median, min and max of `v` (non-empty).
json Summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {{"median", v[v.size() / 2]}, {"min", v.front()}, {"max", v.back()}};
}

// One repetition at batch size n: the mean step latency in ms over the timed
// steps, or a negative value with `error` set.
double TimeSteps(const std::shared_ptr<const engine::Model>& model, int n,
                 const BatchBenchOptions& o, uint64_t seed, std::string* error) {
  const int64_t vocab = engine::Info(*model).vocab_size;
  engine::BatchOptions bo;
  bo.prefill_budget_tokens = std::max(bo.prefill_budget_tokens, n * o.prompt_tokens);
  engine::Batch batch(model, bo);
  for (int s = 0; s < n; ++s) {
    engine::GenerateRequest r;
    uint64_t x = seed + 7919 * static_cast<uint64_t>(s);
    for (int i = 0; i < o.prompt_tokens; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      r.prompt.push_back(static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3)));
    }
    r.max_new_tokens = o.warmup_steps + o.decode_steps + 2;
    r.stop_ids = std::vector<int32_t>{};
    auto id = batch.Add(r);
    if (!id.ok()) {
      *error = id.error().message;
      return -1;
    }
  }
  const auto step = [&] {
    auto steps = batch.Step();
    if (!steps.ok()) *error = steps.error().message;
    return steps.ok();
  };
  while (batch.decoding() < static_cast<size_t>(n)) {
    if (!step()) return -1;
  }
  for (int i = 0; i < o.warmup_steps; ++i) {
    if (!step()) return -1;
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < o.decode_steps; ++i) {
    if (!step()) return -1;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return ms / o.decode_steps;
}

}  // namespace

void QuantizeOptions(const std::string& name, engine::LoadOptions& load) {
  const size_t plus = name.find("+emb");
  load.quantize = name.substr(0, plus);
  load.quantize_embeddings = plus != std::string::npos;
}

json MeasureBatch(const std::filesystem::path& dir, const std::string& dtype,
                  const BatchBenchOptions& o) {
  engine::InitWorkerThread(o.threads);
  engine::LoadOptions load{o.device, dtype, o.pack};
  QuantizeOptions(o.quantize, load);
  auto model = engine::LoadModel(dir, load);
  if (!model.ok()) return {{"error", model.error().message}};
  json per_n = json::array();
  double base_step_ms = 0, base_tok_s = 0;
  for (const int n : o.sequences) {
    std::vector<double> step_ms, aggregate, per_sequence;
    for (int rep = 0; rep < o.repetitions; ++rep) {
      std::string error;
      const double ms = TimeSteps(*model, n, o, RepetitionSeed(rep), &error);
      if (ms < 0) return {{"error", error}};
      step_ms.push_back(ms);
      aggregate.push_back(n * 1000.0 / ms);
      per_sequence.push_back(1000.0 / ms);
    }
    json r = {{"sequences", n},
              {"step_ms", Summary(step_ms)},
              {"aggregate_tok_s", Summary(aggregate)},
              {"per_sequence_tok_s", Summary(per_sequence)}};
    const double median_ms = r["step_ms"]["median"].get<double>();
    const double median_tok_s = r["aggregate_tok_s"]["median"].get<double>();
    if (base_step_ms == 0) {
      base_step_ms = median_ms;
      base_tok_s = median_tok_s;
    }
    // Ratios of medians to the first N measured (N = 1 by default).
    r["aggregate_ratio_to_first"] = median_tok_s / base_tok_s;
    r["step_latency_ratio_to_first"] = median_ms / base_step_ms;
    per_n.push_back(std::move(r));
  }
  return {{"device", engine::Info(**model).device},
          {"dtype", dtype},
          // A quantized model is not packed (LoadOptions::quantize).
          {"packed", o.pack && engine::Info(**model).quantization == "none"},
          {"quantize", engine::Info(**model).quantization},
          {"quantized_embeddings", engine::Info(**model).quantized_embeddings},
          {"batch", per_n}};
}

void ServeBatchSteps(const std::filesystem::path& dir, const std::string& dtype,
                     const BatchBenchOptions& o, int in, int out) {
  LineIo io(in, out);
  engine::InitWorkerThread(o.threads);
  engine::LoadOptions load{o.device, dtype, o.pack};
  QuantizeOptions(o.quantize, load);
  auto model = engine::LoadModel(dir, load);
  if (!model.ok()) {
    io.Write("error: " + model.error().message);
    return;
  }
  if (!io.Write("ready")) return;
  while (const std::optional<std::string> request = io.Read()) {
    std::istringstream fields(*request);
    int n = 0;
    uint64_t seed = 0;
    if (!(fields >> n >> seed) || n < 1) {
      io.Write("error: bad request '" + *request + "'");
      continue;
    }
    std::string error;
    const double ms = TimeSteps(*model, n, o, seed, &error);
    if (!io.Write(ms < 0 ? "error: " + error : std::to_string(ms))) return;
  }
}

}  // namespace medq::bench
