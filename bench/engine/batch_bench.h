// engine_bench --batch: aggregate decode throughput of the continuous batch
// (daemon/engine/batch.h) with 1, 2, 4, 8 concurrent sequences, on the CPU or
// a CUDA device.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/engine/engine.h"

namespace medq::bench {

struct BatchBenchOptions {
  std::vector<int> sequences = {1, 2, 4, 8};
  int prompt_tokens = 16;
  int decode_steps = 64;  // timed steps, after every sequence has its first token
  int warmup_steps = 2;   // untimed steps before them
  int repetitions = 3;
  int threads = 0;
  std::string device = "cpu";  // or cuda:N
  // engine::LoadOptions::pack_for_batches, as the daemon loads models where
  // generations run side by side (max_concurrent > 1).
  bool pack = true;
  // engine::LoadOptions::quantize: "none", "int8" or "int4" (quantized
  // models are not packed), or "int8+emb" / "int4+emb": the same with
  // LoadOptions::quantize_embeddings (QuantizeOptions).
  std::string quantize = "none";
};

// Sets load.quantize and load.quantize_embeddings from a benchmark's
// quantization name: "none", "int8", "int4", "int8+emb", "int4+emb".
void QuantizeOptions(const std::string& name, engine::LoadOptions& load);

// The seed of repetition `rep`'s prompts: MeasureBatch's, and what a
// ServeBatchSteps client sends, so that both time the same prompts.
inline uint64_t RepetitionSeed(int rep) {
  return 12345 + 1000 * static_cast<uint64_t>(rep);
}

// Runs in a child process (it initialises the engine's worker thread): loads
// `dir` on `options.device` with `dtype` and, for each batch size N, `repetitions`
// times: N sequences with distinct random prompts are added, prefilled, then
// `decode_steps` steps are timed (each gives every sequence one token).
// Returns per N the median and range over repetitions of the step latency,
// aggregate and per-sequence tok/s, and the ratios to N = 1.
nlohmann::json MeasureBatch(const std::filesystem::path& dir, const std::string& dtype,
                            const BatchBenchOptions& options);

// The same measurement on request, for a program that stays up
// (resident_child.h): initialises the engine's worker thread, loads `dir`
// once and writes "ready" (or "error: " and why) to `out`. Then, for each
// line "N SEED" read from `in`, times one repetition of N sequences whose
// prompts come from SEED (`options.sequences` and `repetitions` unused) and
// answers with its ms per step, or "error: " and why, until `in` ends.
void ServeBatchSteps(const std::filesystem::path& dir, const std::string& dtype,
                     const BatchBenchOptions& options, int in, int out);

}  // namespace medq::bench
