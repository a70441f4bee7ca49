// kernels_bench: how fast medq::engine::Linear() reads weights on this CPU,
// against LibTorch's own paths and the machine's memory bandwidth, and what
// that means for decode speed of the two reference models. Prints one JSON
// object on stdout; progress goes to stderr. See README.md.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/attention_sweep.h"
#include "bench/kernels/model_shapes.h"
#include "bench/kernels/timing.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/linear.h"

namespace medq::bench {
namespace {

using nlohmann::json;

// Copies of each benchmarked matrix are rotated until this many bytes are
// live, so that every call reads its weights from memory, not from the 32 MB
// L3 cache.
constexpr double kRotationBytes = 256e6;

struct Options {
  TimingOptions timing;
  std::string only;  // empty: every section
  bool sweep = true;
  bool scalar = true;
  bool avx512 = true;  // false: the AVX2 table where AVX-512VL would be chosen
  std::vector<int64_t> prefill_rows = {4, 16, 32, 64, 256};
};

const char* DtypeName(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? "bf16" : "f32";
}

std::vector<torch::Tensor> RotatedCopies(int64_t out, int64_t in, torch::ScalarType dtype) {
  const double bytes = static_cast<double>(out * in) * torch::elementSize(dtype);
  const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(kRotationBytes / bytes + 0.5));
  std::vector<torch::Tensor> copies;
  for (int64_t i = 0; i < count; ++i) {
    copies.push_back(torch::empty({out, in}).uniform_(-0.05, 0.05).to(dtype));
  }
  return copies;
}

json GbPerSecond(const Options& o, double bytes, const std::function<void(int64_t)>& call) {
  return Summary(GigabytesPerSecond(SecondsPerCall(o.timing, call), bytes));
}

json Environment() {
  json env;
  env["torch_version"] = TORCH_VERSION;
  env["intra_op_threads"] = at::get_num_threads();
  env["kernel_threads"] = engine::kernels::KernelThreads();
  env["inter_op_threads"] = at::get_num_interop_threads();
  env["kernels"] = engine::ActiveKernelsName();
  std::istringstream config(at::show_config());
  std::string line;
  while (std::getline(config, line)) {
    if (line.find("BLAS_INFO") != std::string::npos) env["blas_info"] = line;
  }
  std::istringstream parallel(at::get_parallel_info());
  while (std::getline(parallel, line)) {
    if (line.find("backend") != std::string::npos) env["parallel_backend"] = line;
  }
  return env;
}

// A vectorized sum over a 512 MB buffer: the read bandwidth Linear() can hope
// for, with all intra-op threads and with one.
json MemoryRead(const Options& o) {
  const torch::Tensor buffer = torch::empty({128 * 1000 * 1000}).fill_(1.0f);
  const double bytes = static_cast<double>(buffer.nbytes());
  json result;
  const int threads = at::get_num_threads();
  for (int t : {threads, 1}) {
    at::set_num_threads(t);
    result[std::to_string(t) + "_threads"] =
        GbPerSecond(o, bytes, [&](int64_t) { (void)buffer.sum().item<float>(); });
  }
  at::set_num_threads(threads);
  return result;
}

// What one at::parallel_for costs with an empty body: the floor under every
// parallel Linear() call.
json ParallelForOverhead(const Options& o) {
  const std::vector<double> seconds = SecondsPerCall(
      o.timing, [](int64_t) { at::parallel_for(0, 1024, 1, [](int64_t, int64_t) {}); });
  std::vector<double> micros;
  for (double s : seconds)
    micros.push_back(s * 1e6);
  return Summary(micros);
}

// One row against int8 weights (one float32 scale a row) and int4 weights
// (groups of 64, bf16 scale and minimum) next to the same shape in bf16: GB/s
// of the bytes each reads, and each one's speedup over bf16, the ratio of the
// times a product. Every format has its own rotated copies, so each call
// reads its weights from memory.
json QuantizedMatVecCase(const Options& o, const MatrixShape& s) {
  constexpr int64_t kGroup = 64;
  const std::vector<torch::Tensor> w16 = RotatedCopies(s.out, s.in, torch::kBFloat16);
  std::vector<torch::Tensor> w8, w4, p4;
  for (size_t i = 0; i < w16.size(); ++i) {
    w8.push_back(torch::randint(-127, 128, {s.out, s.in}).to(torch::kChar));
    w4.push_back(torch::randint(0, 256, {s.out, s.in / 2}).to(torch::kByte));
    // Scale and minimum of each group as int4 quantization would give for
    // weights in [-0.05, 0.05]; their values do not change the timing.
    const torch::Tensor scale = torch::rand({s.out, s.in / kGroup, 1}).mul_(0.01);
    const torch::Tensor minimum = torch::rand({s.out, s.in / kGroup, 1}).mul_(-0.05);
    p4.push_back(torch::cat({scale, minimum}, 2).to(torch::kBFloat16).contiguous());
  }
  const torch::Tensor scale = torch::rand({s.out}).mul_(0.01);
  const auto n = static_cast<int64_t>(w16.size());
  const torch::Tensor x = torch::randn({1, s.in});
  const double bytes16 = static_cast<double>(w16[0].nbytes());
  const double bytes8 = static_cast<double>(w8[0].nbytes() + scale.nbytes());
  const double bytes4 = static_cast<double>(w4[0].nbytes() + p4[0].nbytes());
  json c{{"out", s.out},
         {"in", s.in},
         {"bf16_bytes", bytes16},
         {"int8_bytes", bytes8},
         {"int4_bytes", bytes4}};
  c["bf16_gbps"] = GbPerSecond(o, bytes16, [&](int64_t i) { engine::Linear(x, w16[i % n]); });
  c["int8_gbps"] =
      GbPerSecond(o, bytes8, [&](int64_t i) { engine::Linear(x, w8[i % n], {}, scale); });
  c["int4_gbps"] =
      GbPerSecond(o, bytes4, [&](int64_t i) { engine::Linear(x, w4[i % n], {}, p4[i % n]); });
  const double bf16_seconds = bytes16 / c["bf16_gbps"]["median"].get<double>();
  c["int8_speedup"] = bf16_seconds / (bytes8 / c["int8_gbps"]["median"].get<double>());
  c["int4_speedup"] = bf16_seconds / (bytes4 / c["int4_gbps"]["median"].get<double>());
  // int4 weights a second (billions), the figure the compute-bound int4
  // kernels are judged by.
  c["int4_gweights_per_s"] =
      c["int4_gbps"]["median"].get<double>() * static_cast<double>(s.out * s.in) / bytes4;
  return c;
}

json MatVecCase(const Options& o, const MatrixShape& s, torch::ScalarType dtype) {
  const std::vector<torch::Tensor> w = RotatedCopies(s.out, s.in, dtype);
  const double bytes = static_cast<double>(w[0].nbytes());
  const auto n = static_cast<int64_t>(w.size());
  const torch::Tensor x = torch::randn({1, s.in});
  const torch::Tensor x_native = x.to(dtype);
  const torch::Tensor x_vec = x_native.view({s.in});
  json c{{"out", s.out},
         {"in", s.in},
         {"dtype", DtypeName(dtype)},
         {"weight_bytes", bytes},
         {"path", engine::LinearPathName(engine::SelectLinearPath(x, w[0]))}};
  c["linear_gbps"] = GbPerSecond(o, bytes, [&](int64_t i) { engine::Linear(x, w[i % n]); });
  if (at::get_num_threads() > 1) {
    engine::kernels::SetOpenMpRowSplit(true);
    c["linear_openmp_gbps"] =
        GbPerSecond(o, bytes, [&](int64_t i) { engine::Linear(x, w[i % n]); });
    engine::kernels::SetOpenMpRowSplit(false);
  }
  if (o.scalar) {
    engine::SetSimdKernelsEnabled(false);
    c["linear_scalar_gbps"] =
        GbPerSecond(o, bytes, [&](int64_t i) { engine::Linear(x, w[i % n]); });
    engine::SetSimdKernelsEnabled(true);
  }
  // LibTorch on the weights' own dtype (x converted to it).
  c["at_linear_gbps"] =
      GbPerSecond(o, bytes, [&](int64_t i) { (void)at::linear(x_native, w[i % n]); });
  c["torch_mv_gbps"] = GbPerSecond(o, bytes, [&](int64_t i) { (void)torch::mv(w[i % n], x_vec); });
  c["linear_seconds_median"] = bytes / c["linear_gbps"]["median"].get<double>() / 1e9;
  return c;
}

// Several rows of x against bf16 weights: Linear()'s kernel against the
// alternatives it could have used.
json PrefillCase(const Options& o, const MatrixShape& s, int64_t rows) {
  const std::vector<torch::Tensor> w = RotatedCopies(s.out, s.in, torch::kBFloat16);
  const double bytes = static_cast<double>(w[0].nbytes());
  const auto n = static_cast<int64_t>(w.size());
  const torch::Tensor x = torch::randn({rows, s.in});
  const torch::Tensor w_f32 = w[0].to(torch::kFloat);
  const double flops = 2.0 * static_cast<double>(rows * s.out * s.in);
  auto gflops = [&](const std::function<void(int64_t)>& call) {
    std::vector<double> rates;
    for (double sec : SecondsPerCall(o.timing, call))
      rates.push_back(flops / sec / 1e9);
    return Summary(rates);
  };
  json c{
      {"out", s.out},          {"in", s.in},
      {"rows", rows},          {"dtype", "bf16"},
      {"weight_bytes", bytes}, {"path", engine::LinearPathName(engine::SelectLinearPath(x, w[0]))}};
  const torch::Tensor none;
  c["linear_gflops"] = gflops([&](int64_t i) { engine::Linear(x, w[i % n]); });
  c["matmul_bf16_gflops"] =
      gflops([&](int64_t i) { engine::kernels::CpuMatMulBf16(x, w[i % n], none); });
  c["tiled_gemm_bf16_gflops"] =
      gflops([&](int64_t i) { engine::kernels::CpuTiledGemmBf16(x, w[i % n], none); });
  c["convert_then_gemm_gflops"] =
      gflops([&](int64_t i) { (void)at::linear(x, w[i % n].to(torch::kFloat)); });
  // Not an option for bf16 weights (it needs the float32 copy in memory), but
  // the GEMM speed the other two are bounded by. One copy: it may be cached.
  c["f32_gemm_cached_gflops"] = gflops([&](int64_t) { (void)at::linear(x, w_f32); });
  return c;
}

struct ModelWeights {
  std::vector<std::vector<torch::Tensor>> layers;  // per layer, LayerMatrices() order
  std::vector<torch::Tensor> biases;               // q, k, v biases (shared)
  torch::Tensor lm_head;
};

ModelWeights AllocateModel(const ModelShape& m, torch::ScalarType dtype) {
  ModelWeights weights;
  for (int64_t l = 0; l < m.layers; ++l) {
    std::vector<torch::Tensor> layer;
    for (const MatrixShape& s : m.LayerMatrices()) {
      layer.push_back(torch::empty({s.out, s.in}).uniform_(-0.05, 0.05).to(dtype));
    }
    weights.layers.push_back(std::move(layer));
  }
  if (m.qkv_bias) {
    for (int j = 0; j < 3; ++j)
      weights.biases.push_back(torch::randn({m.LayerMatrices()[j].out}));
  }
  weights.lm_head = torch::empty({m.vocab, m.hidden}).uniform_(-0.05, 0.05).to(dtype);
  return weights;
}

// Every dense layer of one decode step, in order, through Linear(): the
// measured ceiling of decode speed set by the Linear part alone.
json ModelSweep(const Options& o, const ModelShape& m, torch::ScalarType dtype) {
  const ModelWeights weights = AllocateModel(m, dtype);
  const torch::Tensor xh = torch::randn({1, m.hidden});
  const torch::Tensor xi = torch::randn({1, m.intermediate});
  const torch::Tensor xq = torch::randn({1, m.heads * m.head_dim});
  const std::vector<double> seconds = SecondsPerCall(o.timing, [&](int64_t) {
    for (const std::vector<torch::Tensor>& layer : weights.layers) {
      for (size_t j = 0; j < layer.size(); ++j) {
        const torch::Tensor& x = j == 6 ? xi : (j == 3 ? xq : xh);
        const torch::Tensor bias = j < weights.biases.size() ? weights.biases[j] : torch::Tensor();
        engine::Linear(x, layer[j], bias);
      }
    }
    engine::Linear(xh, weights.lm_head);
  });
  std::vector<double> tokens_per_s;
  for (double s : seconds)
    tokens_per_s.push_back(1.0 / s);
  return Summary(tokens_per_s);
}

// One batched decode step's dense layers (MatRowsInto, each layer with its own
// weights, lm_head last) for m = 1, 2, 4, 8 rows: the Linear part of a step
// of engine_bench --batch, without attention and scheduling. Reports ms per
// step and, per m, the ratio of the aggregate rows per second to m = 1's.
json MatRowsSweep(const Options& o, const ModelShape& m, torch::ScalarType dtype) {
  const ModelWeights weights = AllocateModel(m, dtype);
  const int64_t widest = std::max(m.hidden, std::max(m.intermediate, m.heads * m.head_dim));
  const torch::Tensor x = torch::randn({8, widest});
  std::vector<float> y(static_cast<size_t>(8 * m.vocab));
  json result = json::array();
  double first = 0.0;
  for (int64_t rows : {1, 2, 4, 8}) {
    const std::vector<double> seconds = SecondsPerCall(o.timing, [&](int64_t) {
      for (const std::vector<torch::Tensor>& layer : weights.layers) {
        for (size_t j = 0; j < layer.size(); ++j) {
          const float* bias =
              j < weights.biases.size() ? weights.biases[j].data_ptr<float>() : nullptr;
          engine::kernels::MatRowsInto(layer[j], x.data_ptr<float>(), rows, bias, y.data());
        }
      }
      engine::kernels::MatRowsInto(weights.lm_head, x.data_ptr<float>(), rows, nullptr, y.data());
    });
    std::vector<double> ms;
    for (double s : seconds)
      ms.push_back(s * 1e3);
    json c{{"rows", rows}, {"step_ms", Summary(ms)}};
    const double median = c["step_ms"]["median"].get<double>();
    if (rows == 1) first = median;
    c["aggregate_ratio_to_1"] = static_cast<double>(rows) * first / median;
    c["step_ratio_to_1"] = median / first;
    result.push_back(c);
  }
  return result;
}

// The matrows tiles' arithmetic alone: 8 weight rows (at most 28 KB, so they
// stay in L1 and one thread runs them) against 2 and 4 x rows, looped; ns per
// weight and x row, for each kernel table this CPU has (avx2_fma: tiles of
// one weight row and two x rows, avx512vl: of two weight rows and up to four
// x rows in 512-bit registers; only the first with --no-avx512). Bound
// by the tiles' loads and FMAs, not by memory: what decides how much more
// than one row four rows cost.
json MatRowsFromCache(const Options& o) {
  constexpr int64_t kOut = 8;
  json result = json::array();
  std::string previous;
  for (const bool use_avx512 : {false, true}) {
    if (use_avx512 && !o.avx512) break;
    engine::SetAvx512KernelsEnabled(use_avx512);
    if (previous == engine::ActiveKernelsName()) break;  // no AVX-512VL here
    previous = engine::ActiveKernelsName();
    for (const torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
      for (const int64_t in : {576, 896}) {
        const torch::Tensor w = torch::randn({kOut, in}).to(dtype);
        const torch::Tensor x = torch::randn({4, in});
        std::vector<float> y(static_cast<size_t>(4 * kOut));
        for (const int64_t rows : {2, 4}) {
          const std::vector<double> seconds = SecondsPerCall(o.timing, [&](int64_t) {
            engine::kernels::MatRowsInto(w, x.data_ptr<float>(), rows, nullptr, y.data());
          });
          std::vector<double> ns;
          for (double sec : seconds)
            ns.push_back(sec * 1e9 / static_cast<double>(kOut * in * rows));
          result.push_back({{"kernels", engine::ActiveKernelsName()},
                            {"dtype", DtypeName(dtype)},
                            {"in", in},
                            {"rows", rows},
                            {"ns_per_weight_and_row", Summary(ns)}});
        }
      }
    }
  }
  engine::SetAvx512KernelsEnabled(o.avx512);
  return result;
}

json Models(const Options& o, const std::map<std::pair<std::string, int64_t>, double>& seconds) {
  json models = json::array();
  for (const ModelShape& m : BenchModels()) {
    for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
      const std::string dt = DtypeName(dtype);
      json c{{"model", m.name},
             {"dtype", dt},
             {"weight_bytes_per_token", m.ElementsPerToken() * torch::elementSize(dtype)},
             {"llama_cpp_tok_s",
              dtype == torch::kFloat ? m.llama_cpp_f32_tok_s : m.llama_cpp_f16_tok_s},
             {"llama_cpp_dtype", dtype == torch::kFloat ? "F32" : "F16"}};
      // Estimate: the medians of the single-matrix runs, summed over the model.
      double total = 0.0;
      bool complete = true;
      auto add = [&](const MatrixShape& s, int64_t count) {
        const auto it = seconds.find({dt, s.out * 1000000 + s.in});
        if (it == seconds.end()) {
          complete = false;
        } else {
          total += it->second * static_cast<double>(count);
        }
      };
      for (const MatrixShape& s : m.LayerMatrices())
        add(s, m.layers);
      add(m.LmHead(), 1);
      if (complete) {
        c["estimate_ms_per_token"] = total * 1e3;
        c["estimate_tok_s"] = 1.0 / total;
      }
      if (o.sweep) {
        std::cerr << "sweep " << m.name << " " << dt << "\n";
        c["sweep_tok_s"] = ModelSweep(o, m, dtype);
      }
      models.push_back(c);
    }
  }
  return models;
}

bool Wanted(const Options& o, const char* section) {
  return o.only.empty() || o.only == section;
}

int Run(const Options& o) {
  c10::InferenceMode inference;
  json report;
  report["environment"] = Environment();
  report["note"] =
      "timings on a shared 2-core machine; compare runs taken close together, and the "
      "medians rather than single values";
  report["repeats"] = o.timing.repeats;
  if (Wanted(o, "memory")) {
    std::cerr << "memory read\n";
    report["memory_read_gbps"] = MemoryRead(o);
    report["parallel_for_overhead_us"] = ParallelForOverhead(o);
  }
  std::map<std::pair<std::string, int64_t>, double> seconds;  // (dtype, out*1e6+in)
  if (Wanted(o, "matvec") || Wanted(o, "models")) {
    json cases = json::array();
    for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
      for (const MatrixShape& s : BenchMatrices()) {
        std::cerr << "matvec " << DtypeName(dtype) << " " << s.out << "x" << s.in << "\n";
        json c = MatVecCase(o, s, dtype);
        seconds[{DtypeName(dtype), s.out * 1000000 + s.in}] = c["linear_seconds_median"];
        cases.push_back(std::move(c));
      }
    }
    report["matvec"] = std::move(cases);
  }
  if (Wanted(o, "quantized")) {
    json cases = json::array();
    for (const MatrixShape& s : BenchMatrices()) {
      std::cerr << "matvec bf16/int8/int4 " << s.out << "x" << s.in << "\n";
      cases.push_back(QuantizedMatVecCase(o, s));
    }
    report["matvec_quantized"] = std::move(cases);
  }
  if (Wanted(o, "prefill")) {
    json cases = json::array();
    for (const MatrixShape& s : BenchMatrices()) {
      if (s.out * s.in > 10'000'000) continue;  // lm_head is not run on prefill rows
      for (int64_t rows : o.prefill_rows) {
        std::cerr << "prefill bf16 " << s.out << "x" << s.in << " rows " << rows << "\n";
        cases.push_back(PrefillCase(o, s, rows));
      }
    }
    report["prefill_bf16"] = std::move(cases);
  }
  if (Wanted(o, "models")) report["models"] = Models(o, seconds);
  if (Wanted(o, "matrows")) {
    json cases = json::array();
    for (const ModelShape& m : BenchModels()) {
      for (torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
        std::cerr << "matrows " << m.name << " " << DtypeName(dtype) << "\n";
        cases.push_back(
            {{"model", m.name}, {"dtype", DtypeName(dtype)}, {"steps", MatRowsSweep(o, m, dtype)}});
      }
    }
    report["matrows_sweep"] = std::move(cases);
    report["matrows_from_cache"] = MatRowsFromCache(o);
  }
  if (Wanted(o, "attention")) report["attention"] = AttentionSweep(o.timing);
  std::cout << report.dump(2) << std::endl;
  return 0;
}

}  // namespace
}  // namespace medq::bench

int main(int argc, char** argv) {
  CLI::App app{"Benchmark medq's Linear() kernels; prints JSON"};
  medq::bench::Options options;
  int threads = 0;
  app.add_option("--repeats", options.timing.repeats, "Measurements per case")
      ->check(CLI::PositiveNumber);
  app.add_option("--min-time", options.timing.min_seconds, "Seconds each measurement loops")
      ->check(CLI::PositiveNumber);
  app.add_option("--only", options.only,
                 "One section: memory, matvec, quantized, prefill, models, matrows or attention")
      ->check(CLI::IsMember(
          {"memory", "matvec", "quantized", "prefill", "models", "matrows", "attention"}));
  app.add_option("--threads", threads,
                 "LibTorch intra-op threads and Linear()'s threads (default: LibTorch's choice "
                 "and one per core)");
  app.add_option("--prefill-rows", options.prefill_rows, "Rows of x in the prefill cases");
  app.add_flag("!--no-sweep", options.sweep, "Skip the whole-model sweeps (they allocate 3 GB)");
  app.add_flag("!--no-scalar", options.scalar, "Skip the scalar-kernel figures");
  app.add_flag("!--no-avx512", options.avx512,
               "Leave the AVX-512VL kernels out (the AVX2 table), to compare the two");
  CLI11_PARSE(app, argc, argv);
  medq::engine::SetAvx512KernelsEnabled(options.avx512);
  if (threads > 0) {
    at::set_num_threads(threads);
    medq::engine::kernels::SetKernelThreads(threads);
  }
  try {
    return medq::bench::Run(options);
  } catch (const std::exception& e) {
    std::cerr << "kernels_bench: " << e.what() << "\n";
    return 1;
  }
}
