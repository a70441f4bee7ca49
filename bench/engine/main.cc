// engine_bench: load time, time to first token, prefill and decode speed and
// peak memory of the engine on random-weight models shaped like SmolLM-135M and
// Qwen2.5-0.5B, for fp32 and bf16 on CPU (and CUDA when available), against
// the decode ceiling set by memory bandwidth. Prints one JSON document.
// --quantize int8 (or int4, or int8,int4) runs each dtype with quantized
// projections too (LoadOptions::quantize), --repeat times each, alternating,
// and adds the medians and ranges of the decode speeds, each quantization
// against the unquantized dtype ("quantize_comparison"). "int8+emb" and
// "int4+emb" quantize lm_head and the embeddings too
// (LoadOptions::quantize_embeddings).
//
// Each configuration runs in its own child process so that its peak RSS is its
// own (getrusage of the child); the parent never touches LibTorch.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/common/crash_trace.h"
#include "bench/common/remove_tree.h"
#include "bench/engine/bandwidth.h"
#include "bench/engine/batch_bench.h"
#include "bench/engine/in_child.h"
#include "bench/engine/random_model.h"
#include "daemon/engine/blas_threads.h"
#include "daemon/engine/device_memory.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/host_pool.h"
#include "daemon/engine/kernels/kernel_choice.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Options {
  std::vector<std::string> models;  // names from BenchShapes(); empty = all
  std::vector<std::string> dtypes = {"fp32", "bf16"};
  int prompt_tokens = 128;
  int new_tokens = 128;
  int threads = 0;
  std::string keep;    // write the models here and leave them, for medq-run and perf
  std::string device;  // only this device (cpu, cuda:N); empty: cpu and cuda:0 if present
  bool batch = false;  // --batch: continuous-batching throughput instead (--device, or the CPU)
  bool avx512 = true;  // --no-avx512: the AVX2 kernel table where AVX-512VL would be chosen
  bool vnni = true;    // --no-vnni: int4 products on AVX2's vpmaddubsw where VNNI would run
  // --quantize int8,int4: each dtype also with these quantized projections
  std::vector<std::string> quantize;
  int repeat = 1;  // runs of each configuration, alternating
  medq::bench::BatchBenchOptions batch_options;
};

// {"median", "min", "max", "runs"} of `values` (not empty).
json Summary(std::vector<double> values) {
  json runs = values;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {{"median", median}, {"min", values.front()}, {"max", values.back()}, {"runs", runs}};
}

// Runs in the child: measures one model, dtype and device.
json Measure(const fs::path& dir, const std::string& device, const std::string& dtype,
             const std::string& quantize, const Options& o) {
  using Clock = std::chrono::steady_clock;
  medq::engine::InitWorkerThread(o.threads);
  const auto t0 = Clock::now();
  medq::engine::LoadOptions load{device, dtype};
  medq::bench::QuantizeOptions(quantize, load);
  auto model = medq::engine::LoadModel(dir, load);
  if (!model.ok()) return {{"error", model.error().message}};
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const auto& info = medq::engine::Info(**model);

  medq::engine::GenerateRequest r;
  uint64_t x = 12345;
  for (int i = 0; i < o.prompt_tokens; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    r.prompt.push_back(
        static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(info.vocab_size - 3)));
  }
  r.stop_ids = std::vector<int32_t>{};
  const auto ignore = [](int32_t) { return true; };
  r.max_new_tokens = 1;  // first run after load: time to first token
  auto first = medq::engine::Generate(**model, r, ignore);
  if (!first.ok()) return {{"error", first.error().message}};
  r.max_new_tokens = o.new_tokens;
  auto run = medq::engine::Generate(**model, r, ignore);
  if (!run.ok()) return {{"error", run.error().message}};
  const int decoded = run->new_tokens - 1;  // the first new token comes from prefill
  json out = {
      {"device", info.device},
      {"dtype", info.dtype},
      {"quantize", info.quantization},
      {"quantized_embeddings", info.quantized_embeddings},
      {"parameter_bytes", info.parameter_bytes},
      {"load_ms", load_ms},
      {"ttft_ms", first->prefill_ms},
      {"prefill_ms", run->prefill_ms},
      {"prefill_tok_s", o.prompt_tokens / (run->prefill_ms / 1000.0)},
      {"decode_tokens", decoded},
      {"decode_tok_s", decoded > 0 ? decoded / (run->decode_ms / 1000.0) : 0.0},
      // The host's own time a decode step (a step's wall time less its wait
      // for the device): what a GPU step must keep off its critical path.
      {"decode_host_ms_per_token",
       decoded > 0 ? (run->decode_ms - run->decode_wait_ms) / decoded : 0.0},
  };
  for (const auto& m : medq::engine::QueryDeviceMemory()) {
    if (info.device == "cuda:" + std::to_string(m.index)) {
      out["device_reserved_bytes"] = m.reserved_bytes;  // the caching allocator keeps its peak
    }
  }
  if (info.device.rfind("cuda:", 0) == 0) {
    const int index = std::stoi(info.device.substr(5));
    out["device_read_bandwidth_bytes_s"] =
        medq::engine::DeviceReadBandwidth(index, size_t{1} << 30);
    // cleanup = after-each against never: the same request five times each
    // way, with the caching allocator emptied after each run or not.
    const auto per_request_ms = [&](bool empty_after) {
      std::vector<double> ms;
      for (int i = 0; i < 5; ++i) {
        const auto t = Clock::now();
        if (!medq::engine::Generate(**model, r, ignore).ok()) return -1.0;
        if (empty_after) medq::engine::EmptyDeviceCaches();
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
      }
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    const double never_ms = per_request_ms(false);
    const double after_each_ms = per_request_ms(true);
    out["request_ms_cleanup_never"] = never_ms;
    out["request_ms_cleanup_after_each"] = after_each_ms;
    for (const auto& m : medq::engine::QueryDeviceMemory()) {
      if (m.index == index) out["device_reserved_after_cleanup_bytes"] = m.reserved_bytes;
    }
  }
  return out;
}

int Run(const Options& o) {
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  const double bandwidth = medq::bench::MeasureReadBandwidth(threads, size_t{1} << 30);
  const bool cuda = medq::bench::InChild([] {
                      return json{{"cuda", medq::engine::CudaAvailable()}};
                    }).value("cuda", false);
  std::vector<std::string> devices = {"cpu"};
  if (cuda) devices.push_back("cuda:0");
  if (!o.device.empty()) devices = {o.device};

  const fs::path root = !o.keep.empty() ? fs::path(o.keep)
                                        : fs::temp_directory_path() /
                                              ("medq-engine-bench-" + std::to_string(::getpid()));
  json results = json::array();
  // --quantize: decode tok/s per model, device, dtype and quantization.
  std::map<std::vector<std::string>, std::vector<double>> decode;
  std::vector<std::string> quantizations = {"none"};
  for (const auto& q : o.quantize) {
    if (q != "none") quantizations.push_back(q);
  }
  std::vector<medq::bench::ModelShape> shapes = medq::bench::BenchShapes();
  for (const auto& large : medq::bench::LargeShapes()) {
    if (std::find(o.models.begin(), o.models.end(), large.name) != o.models.end()) {
      shapes.push_back(large);  // only when named: 14.5 GB written
    }
  }
  for (const auto& shape : shapes) {
    if (!o.models.empty() &&
        std::find(o.models.begin(), o.models.end(), shape.name) == o.models.end()) {
      continue;
    }
    const fs::path dir = root / shape.name;
    const medq::Status written = medq::bench::WriteRandomModel(shape, dir);
    if (!written.ok()) {
      std::fprintf(stderr, "engine_bench: %s\n", written.error().message.c_str());
      if (o.keep.empty()) medq::bench::RemoveTree(root.string());
      return 1;
    }
    for (const auto& device : o.batch ? std::vector<std::string>{devices.front()} : devices) {
      for (const auto& dtype : o.dtypes) {
        if (o.batch) {
          for (const auto& quantize : quantizations) {
            medq::bench::BatchBenchOptions b = o.batch_options;
            b.device = device;
            b.quantize = quantize;
            json r = medq::bench::InChild([&] { return medq::bench::MeasureBatch(dir, dtype, b); });
            r["model"] = shape.name;
            std::fprintf(stderr, "%s\n", r.dump().c_str());
            results.push_back(std::move(r));
          }
          continue;
        }
        // Rounds alternate the quantizations, so that a machine whose
        // bandwidth drifts moves both alike.
        for (int round = 0; round < std::max(1, o.repeat); ++round) {
          for (const auto& quantize : quantizations) {
            json r = medq::bench::InChild([&] { return Measure(dir, device, dtype, quantize, o); });
            r["model"] = shape.name;
            const double read =
                device == "cpu" ? bandwidth : r.value("device_read_bandwidth_bytes_s", 0.0);
            if (r.contains("parameter_bytes") && read > 0) {
              // Per token, decode reads every projection and the (tied)
              // lm_head; an untied embedding is read one row at a time and
              // does not count.
              int64_t bytes = r["parameter_bytes"].get<int64_t>();
              if (!shape.tied) {
                const bool int4 = quantize == "int4+emb", int8 = quantize == "int8+emb";
                const int64_t cells = shape.vocab * shape.hidden;
                bytes -= int4   ? cells / 2 + 4 * cells / 64
                         : int8 ? cells + 4 * shape.vocab
                                : cells * (dtype == "fp32" ? 4 : 2);
              }
              // `read`: the CPU's read bandwidth, or the device's (from the child).
              const double ceiling = read / static_cast<double>(bytes);
              r["weight_bytes_per_token"] = bytes;
              r["decode_ceiling_tok_s"] = ceiling;
              r["decode_fraction_of_ceiling"] = r["decode_tok_s"].get<double>() / ceiling;
            }
            if (r.contains("decode_tok_s")) {
              decode[{shape.name, device, dtype, quantize}].push_back(
                  r["decode_tok_s"].get<double>());
            }
            std::fprintf(stderr, "%s\n", r.dump().c_str());
            results.push_back(std::move(r));
          }
        }
      }
    }
    if (o.keep.empty()) medq::bench::RemoveTree(dir.string());
  }
  if (o.keep.empty()) medq::bench::RemoveTree(root.string());
  if (o.batch) {
    const medq::bench::BatchBenchOptions& b = o.batch_options;
    const json doc = {{"benchmark", "engine_batch"},
                      {"threads", threads},
                      {"kernels", medq::engine::ActiveKernelsName()},
                      {"vnni", o.vnni},
                      {"prompt_tokens", b.prompt_tokens},
                      {"decode_steps", b.decode_steps},
                      {"repetitions", b.repetitions},
                      {"read_bandwidth_gb_s", bandwidth / 1e9},
                      {"results", results}};
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  json doc = {
      {"benchmark", "engine"},
      {"threads", threads},
      {"prompt_tokens", o.prompt_tokens},
      {"new_tokens", o.new_tokens},
      {"read_bandwidth_gb_s", bandwidth / 1e9},
      {"cuda", cuda},
      {"results", results},
  };
  if (quantizations.size() > 1) {
    // Per model, device, dtype and quantization: decode tok/s without and with it.
    json comparison = json::array();
    for (const auto& [key, base] : decode) {
      if (key[3] != "none") continue;
      for (size_t i = 1; i < quantizations.size(); ++i) {
        const std::string& quantize = quantizations[i];
        const auto q = decode.find({key[0], key[1], key[2], quantize});
        if (q == decode.end()) continue;
        const json b = Summary(base), s = Summary(q->second);
        comparison.push_back(
            {{"model", key[0]},
             {"device", key[1]},
             {"dtype", key[2]},
             {"quantize", quantize},
             {"decode_tok_s_" + key[2], b},
             {"decode_tok_s_" + quantize, s},
             {"speedup_of_medians", s["median"].get<double>() / b["median"].get<double>()}});
      }
    }
    doc["repeat"] = std::max(1, o.repeat);
    doc["quantize_comparison"] = comparison;
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: as medqd does
  medq::engine::UsePooledHostMemory();
  medq::bench::PrintBacktraceOnCrash();
  Options o;
  CLI::App app{"Engine benchmark on random-weight SmolLM-135M / Qwen2.5-0.5B shaped models"};
  app.add_option("--models", o.models,
                 "Model shapes to run (SmolLM-135M, Qwen2.5-0.5B; Mistral-7B only when "
                 "named); default the first two");
  app.add_option("--dtypes", o.dtypes, "Weight dtypes (fp32, bf16)")->capture_default_str();
  app.add_option("--prompt-tokens", o.prompt_tokens, "Prompt length")->capture_default_str();
  app.add_option("--new-tokens", o.new_tokens, "New tokens to decode")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (0 = all cores)");
  app.add_option("--device", o.device,
                 "Only this device (cpu, cuda:0); default the CPU and cuda:0 when present");
  app.add_option("--keep", o.keep,
                 "Write the models into this directory and keep them (to profile with medq-run)");
  app.add_flag("--batch", o.batch,
               "Continuous batching instead: aggregate decode throughput with "
               "--batch-sequences concurrent sequences (on the CPU unless --device)");
  app.add_option("--batch-sequences", o.batch_options.sequences, "Batch sizes for --batch")
      ->capture_default_str();
  app.add_option("--batch-steps", o.batch_options.decode_steps, "Timed decode steps for --batch")
      ->capture_default_str();
  app.add_option("--batch-repetitions", o.batch_options.repetitions,
                 "Repetitions per batch size for --batch")
      ->capture_default_str();
  app.add_flag("!--batch-row-major", o.batch_options.pack,
               "--batch without the packed copy of the matrices (as with max_concurrent 1), "
               "to compare the two");
  app.add_flag("!--no-avx512", o.avx512,
               "Leave the AVX-512VL kernels out (the AVX2 table), to compare the two");
  app.add_flag("!--no-vnni", o.vnni,
               "int4 products on AVX2's vpmaddubsw, not VNNI's vpdpbusd (the same bits), to "
               "compare the two");
  app.add_option("--quantize", o.quantize,
                 "Also run each dtype with these weight quantizations (int8, int4, or int8,int4; "
                 "int8+emb, int4+emb with lm_head and the embeddings quantized too), and compare "
                 "the decode speeds (quantize_comparison)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "int8", "int4", "int8+emb", "int4+emb"}));
  app.add_option("--repeat", o.repeat,
                 "Runs of each configuration, alternating; medians and ranges with --quantize")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  medq::engine::SetAvx512KernelsEnabled(o.avx512);
  medq::engine::SetVnniKernelsEnabled(o.vnni);
  o.batch_options.threads = o.threads;
  if (o.batch && app.count("--prompt-tokens") > 0) o.batch_options.prompt_tokens = o.prompt_tokens;
  return Run(o);
}
