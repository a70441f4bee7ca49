// Weight-only int8 and int4 quantization (quantize.h, LoadOptions::quantize):
// the round trip's bound (int4's: no group's squared error above its full
// range's), the sizes, the names it takes and refuses, and int8
// fixture models that generate, with logits close to the full-precision
// model's, through the decode step, the LibTorch path and a LoRA merge.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "daemon/engine/batch_testing.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/quantize.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

std::shared_ptr<const Model> MustLoadInt8(const fs::path& dir, const std::string& dtype = "bf16") {
  LoadOptions o{"cpu", dtype};
  o.quantize = "int8";
  auto m = LoadModel(dir, o);
  if (!m.ok()) throw std::runtime_error(m.error().message);
  return *m;
}

int64_t Bytes(const at::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

TEST_CASE("int8 quantize -> dequantize is within half a scale of every weight",
          "[engine][quantize]") {
  torch::manual_seed(3);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& [out, in] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {64, 576}}) {
      INFO(c10::toString(dtype) << " " << out << "x" << in);
      at::Tensor w = at::randn({out, in}).mul_(at::rand({out, 1}).mul_(3)).to(dtype);
      w[0].zero_();  // a row of zeros: scale 0, every value 0
      const QuantizedRows q = QuantizeRowsInt8(w);
      REQUIRE(q.values.scalar_type() == at::kChar);
      REQUIRE(q.scales.scalar_type() == at::kFloat);
      REQUIRE(q.values.sizes() == w.sizes());
      REQUIRE(q.scales.size(0) == out);
      CHECK(q.values.abs().max().item<int>() <= 127);
      CHECK(q.scales[0].item<float>() == 0.0f);
      const at::Tensor wd = w.to(at::kDouble);
      const at::Tensor sd = q.scales.to(at::kDouble).unsqueeze(1);
      // The scale is max |w| / 127 of its row (to float32 rounding).
      CHECK(at::allclose(q.scales.to(at::kDouble), wd.abs().amax(1) / 127.0, 1e-6, 0.0));
      // |w - q · s| <= s / 2 for every element, in exact (double) arithmetic.
      const at::Tensor err = (wd - q.values.to(at::kDouble) * sd).abs();
      CHECK((err - sd / 2).max().item<double>() <= 1e-12);
      // And as the kernels dequantize: float32 q · s, one more rounding, by
      // at most half a float32 ulp of the product.
      const at::Tensor deq = DequantizeRowsInt8(q.values, q.scales).to(at::kDouble);
      CHECK(((wd - deq).abs() - sd / 2 - deq.abs() * 0x1p-24).max().item<double>() <= 0.0);
    }
  }
}

TEST_CASE("int8 weights take at most 0.55 of their bf16 bytes", "[engine][quantize]") {
  // A real projection (Qwen2.5-0.5B's gate/up stack): 0.5 + 2 / in of them,
  // the scales being 4 bytes a row against 2 · in.
  const at::Tensor w = at::randn({2 * 4864, 896}).to(at::kBFloat16);
  const QuantizedRows q = QuantizeRowsInt8(w);
  CHECK(Bytes(q.values) + Bytes(q.scales) <= 0.55 * static_cast<double>(Bytes(w)));
  // A whole model: tiny-llama (in >= 64) with bf16 weights, projections
  // only, and its parameter_bytes go down by what the projections save.
  const fs::path dir = medq::test::ModelFixture("tiny-llama");
  const auto bf16 = MustLoad(dir, "bf16");
  const auto int8 = MustLoadInt8(dir);
  int64_t full = 0, quantized = 0;
  for (size_t i = 0; i < bf16->weights.layers.size(); ++i) {
    const LayerWeights& a = bf16->weights.layers[i];
    const LayerWeights& b = int8->weights.layers[i];
    full += Bytes(a.qkv_proj) + Bytes(a.o_proj) + Bytes(a.gate_up_proj) + Bytes(a.down_proj);
    quantized += Bytes(b.qkv_proj) + Bytes(b.o_proj) + Bytes(b.gate_up_proj) + Bytes(b.down_proj) +
                 Bytes(b.qkv_scale) + Bytes(b.o_scale) + Bytes(b.gate_up_scale) +
                 Bytes(b.down_scale);
  }
  CHECK(quantized <= 0.55 * static_cast<double>(full));
  CHECK(Info(*int8).parameter_bytes == Info(*bf16).parameter_bytes - full + quantized);
  CHECK(Info(*int8).quantization == "int8");
  CHECK(Info(*bf16).quantization == "none");
}

TEST_CASE("quantize takes none, int8 and int4 and refuses other names", "[engine][quantize]") {
  CHECK(ParseQuantization("none").ok());
  CHECK(ParseQuantization("int8").ok());
  CHECK(ParseQuantization("int4").value() == Quantization::kInt4);
  const fs::path dir = medq::test::ModelFixture("tiny-llama");
  for (const std::string name : {"fp8", "int2", ""}) {
    INFO("quantize '" << name << "'");
    LoadOptions o{"cpu", "bf16"};
    o.quantize = name;
    const auto r = LoadModel(dir, o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message, Catch::Contains("none, int8, int4"));
  }
}

// The full-precision model `full` with every projection replaced by its
// quantized model's dequantized matrix (int8 or int4), in float32: what the
// quantized model computes, up to the order of its roundings.
std::shared_ptr<const Model> Dequantized(const Model& full, const Model& quantized) {
  const auto dequantize = [&quantized](const at::Tensor& values, const at::Tensor& scales) {
    return quantized.quantization == Quantization::kInt4 ? DequantizeRowsInt4(values, scales)
                                                         : DequantizeRowsInt8(values, scales);
  };
  auto m = std::make_shared<Model>(full);
  for (size_t i = 0; i < m->weights.layers.size(); ++i) {
    LayerWeights& l = m->weights.layers[i];
    const LayerWeights& q = quantized.weights.layers[i];
    l.qkv_proj = dequantize(q.qkv_proj, q.qkv_scale);
    l.o_proj = dequantize(q.o_proj, q.o_scale);
    l.gate_up_proj = dequantize(q.gate_up_proj, q.gate_up_scale);
    l.down_proj = dequantize(q.down_proj, q.down_scale);
    l.qkv_packed = l.o_packed = l.gate_up_packed = l.down_packed = at::Tensor();
  }
  m->weight_dtype = at::kFloat;
  m->weights.embed = m->weights.embed.to(at::kFloat);
  m->weights.lm_head = m->weights.lm_head.to(at::kFloat);
  return m;
}

// A quantization under test: how to load a fixture with it, the element
// type its projections are stored in, and how far its logits may move.
struct Quantized {
  std::function<std::shared_ptr<const Model>(const fs::path&, const std::string&)> load;
  at::ScalarType stored;
  double max_diff;  // of the largest logit
  double rel_l2;
  // How far the kernels' logits may be from the dequantized model's in
  // float32 (of the largest logit), and by relative L2.
  double kernel_max_diff;
  double kernel_rel_l2;
};

// Its logits against the full-precision model's, every fixture in fp32 and
// bf16, within q's bounds; what its kernels compute against the dequantized
// model in float32, within q's kernel bounds (a wrong scale, row or layout
// moves them by the logits' whole size); and it generates through the CPU
// decode step.
void CheckLogitsClose(const Quantized& q) {
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      const auto ref = ReadTensors(dir / "reference.safetensors");
      const auto full = MustLoad(dir, dtype);
      const auto quantized = q.load(dir, dtype);
      CHECK(Info(*quantized).dtype == Info(*full).dtype);  // embeddings and lm_head keep it
      CHECK(quantized->weights.layers[0].qkv_proj.scalar_type() == q.stored);
      CHECK(quantized->weights.layers[0].q_proj.scalar_type() == q.stored);
      CHECK(quantized->weights.lm_head.scalar_type() == full->weights.lm_head.scalar_type());
      CHECK(quantized->weights.embed.scalar_type() == full->weights.embed.scalar_type());
      CHECK(quantized->weights.layers[0].input_norm.scalar_type() == at::kFloat);
      for (const std::string p : {"prompt1", "prompt2"}) {
        INFO(p);
        const at::Tensor ids = ref.at("input_ids_" + p);
        const at::Tensor a = AllLogits(*quantized, ids);
        const at::Tensor b = AllLogits(*full, ids);
        const double scale = b.abs().max().item<double>();
        const double rel = (a - b).norm().item<double>() / b.norm().item<double>();
        INFO("max diff " << MaxAbsDiff(a, b) / scale << " of the largest logit, relative L2 "
                         << rel);
        CHECK(MaxAbsDiff(a, b) <= q.max_diff * scale);
        CHECK(rel <= q.rel_l2);
        const at::Tensor d = AllLogits(*Dequantized(*full, *quantized), ids);
        INFO("against the dequantized model: max diff "
             << MaxAbsDiff(a, d) / d.abs().max().item<double>() << " of the largest, relative L2 "
             << (a - d).norm().item<double>() / d.norm().item<double>());
        CHECK(MaxAbsDiff(a, d) <= q.kernel_max_diff * d.abs().max().item<double>());
        CHECK((a - d).norm().item<double>() <= q.kernel_rel_l2 * d.norm().item<double>());
      }
      c10::InferenceMode guard;
      CHECK(CpuDecodeRowsApply(*quantized));
      CHECK(Greedy(*quantized, ToIds(ref.at("input_ids_prompt1")), 8).size() == 8);
    }
  }
}

// The CPU decode step and the LibTorch path give the same greedy tokens.
void CheckDecodeStepAgrees(const Quantized& q) {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto quantized = q.load(dir, "bf16");
    const std::vector<int32_t> prompt = ToIds(ref.at("input_ids_prompt1"));
    const std::vector<int32_t> fast = Greedy(*quantized, prompt, 12);
    const ScopedSwitch libtorch(&SetCpuDecodeStepEnabled, false, true);
    CHECK(Greedy(*quantized, prompt, 12) == fast);
  }
}

// Batch invariance on the quantized kernels: every sequence of the
// continuous batch gets, bitwise, the logits it gets decoded alone by
// CpuDecodeStep.
void CheckBatchedIsSolo(const Quantized& q) {
  const ScopedSwitch host_loop(&SetDeviceLoopOnCpu, false, DeviceLoopForced());
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto quantized = q.load(dir, "bf16");
    std::map<SequenceId, std::vector<at::Tensor>> rows;
    SetBatchLogitsObserver([&rows](SequenceId id, const at::Tensor& row) {
      rows[id].push_back(row.to(at::kCPU).clone());
    });
    const std::vector<Joining> requests = MixedRequests(ref);
    const std::vector<Outcome> out = RunBatch(quantized, BatchOptions{}, requests);
    SetBatchLogitsObserver({});
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("sequence " << i);
      const GenerateRequest& r = requests[i].request;
      REQUIRE(out[i].result.has_value());
      // Solo: the prompt, then one CpuDecodeStep a token.
      c10::InferenceMode guard;
      KvCache cache(*quantized, 1, static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens);
      const std::vector<int64_t> ids(r.prompt.begin(), r.prompt.end());
      at::Tensor logits = Forward(*quantized, at::tensor(ids, at::kLong).view({1, -1}), cache,
                                  LogitsFor::kLastPosition);
      const std::vector<at::Tensor>& batched = rows.at(out[i].id);
      REQUIRE(static_cast<int>(batched.size()) == r.max_new_tokens);
      for (int t = 0; t < r.max_new_tokens; ++t) {
        INFO("token " << t);
        CHECK(at::equal(batched[static_cast<size_t>(t)], logits.view({-1})));
        CHECK(out[i].tokens[static_cast<size_t>(t)] == logits.view({-1}).argmax().item<int64_t>());
        if (t + 1 < r.max_new_tokens) {
          const int64_t next = out[i].tokens[static_cast<size_t>(t)];
          logits = Forward(*quantized, at::tensor({next}, at::kLong).view({1, 1}), cache,
                           LogitsFor::kLastPosition);
        }
      }
    }
  }
}

// int8: each weight moves by at most half its row's scale, 1/254 of the
// row's largest weight; through these tiny random-weight models (hidden 32
// to 64) that moved the logits by 1.6 to 3.8% (relative L2) and at most
// 6.3% of the largest logit (measured, x unrounded). Its kernels also round
// x to int8 blocks of 32, the same step (dense_kernels.h): both together,
// up to 6.1% and 11% (measured); the bounds are 10% and 20%. Against the
// dequantized model with x unrounded, the bounds of x's rounding alone
// (engine_test_util.h).
const Quantized kInt8{
    [](const fs::path& dir, const std::string& dtype) { return MustLoadInt8(dir, dtype); },
    at::kChar,
    0.2,
    0.1,
    kXRoundingMaxDiff,
    kXRoundingRelL2};

TEST_CASE("an int8 model's logits are close to the full-precision model's", "[engine][quantize]") {
  CheckLogitsClose(kInt8);
}

TEST_CASE("an int8 model decodes the same through the decode step and the LibTorch path",
          "[engine][quantize]") {
  CheckDecodeStepAgrees(kInt8);
}

TEST_CASE("a batched int8 decode is bitwise a solo run", "[engine][quantize][batch]") {
  CheckBatchedIsSolo(kInt8);
}

TEST_CASE("an adapter merges in full precision, then the merged model is quantized",
          "[engine][quantize][lora]") {
  const fs::path adapter = medq::test::ModelFixture("tiny-llama-lora");
  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  auto merged = ApplyAdapter(base, adapter);
  auto merged_int8 = ApplyAdapter(base, adapter, "int8");
  REQUIRE(merged.ok());
  REQUIRE(merged_int8.ok());
  CHECK(Info(**merged_int8).quantization == "int8");
  CHECK(Info(*base).quantization == "none");
  CHECK(base->weights.layers[0].qkv_proj.scalar_type() == at::kFloat);  // the base unchanged
  const auto ref = ReadTensors(adapter / "reference.safetensors");
  const at::Tensor ids = ref.at("input_ids_prompt1");
  const at::Tensor a = AllLogits(**merged_int8, ids);
  const at::Tensor b = AllLogits(**merged, ids);
  CHECK(MaxAbsDiff(a, b) <= kInt8.max_diff * b.abs().max().item<double>());
  CHECK((a - b).norm().item<double>() <= kInt8.rel_l2 * b.norm().item<double>());
  const at::Tensor d = AllLogits(*Dequantized(**merged, **merged_int8), ids);
  CHECK(MaxAbsDiff(a, d) <= kInt8.kernel_max_diff * d.abs().max().item<double>());
  CHECK((a - d).norm().item<double>() <= kInt8.kernel_rel_l2 * d.norm().item<double>());
  // A quantized base takes no adapter: its full-precision weights are gone.
  const auto r = ApplyAdapter(*merged_int8, adapter);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("quantized") && Catch::Contains("tiny-llama"));
  const auto bad = ApplyAdapter(base, adapter, "int3");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error().message, Catch::Contains("none, int8, int4"));
}

// int4 (asymmetric groups with a bf16 scale and minimum each).

std::shared_ptr<const Model> MustLoadInt4(const fs::path& dir, const std::string& dtype = "bf16",
                                          int64_t group = 32) {
  LoadOptions o{"cpu", dtype};
  o.quantize = "int4";
  o.quantize_group = group;
  auto m = LoadModel(dir, o);
  if (!m.ok()) throw std::runtime_error(m.error().message);
  return *m;
}

// x as bf16 rounded down (toward -inf) or up, the value back as a double:
// the full-range choice's bounds, computed here apart from quantize.cc.
double Bf16Directed(double x, bool up) {
  auto f = static_cast<float>(x);
  if (up ? f < x : f > x) f = std::nextafter(f, up ? INFINITY : -INFINITY);
  // Dropping the low 16 bits moves toward zero; one bf16 step away from
  // zero where that went the wrong way (below f going up, above it down).
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  c10::BFloat16 b(static_cast<uint16_t>(bits >> 16), c10::BFloat16::from_bits());
  if (up ? static_cast<float>(b) < f : static_cast<float>(b) > f) ++b.x;
  return static_cast<float>(b);
}

// Each group's squared error with the full-range choice, as quantize.h's
// contract names it: m = min rounded down, s = (max - m) / 15 rounded up,
// q = clamp(round((w - m) / s), 0, 15), dequantized as fma(q, s, m) in
// float32. w float32 [out, in]; the result double [out, in / group].
at::Tensor FullRangeErrors(const at::Tensor& w, int64_t group) {
  const int64_t out = w.size(0), groups = w.size(1) / group;
  at::Tensor sse = at::zeros({out, groups}, at::kDouble);
  const at::Tensor wc = w.contiguous();
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* v = wc.data_ptr<float>() + r * w.size(1) + g * group;
      const float lo = *std::min_element(v, v + group), hi = *std::max_element(v, v + group);
      const double m = Bf16Directed(lo, false);
      const double s = Bf16Directed((hi - m) / 15.0, true);
      double sum = 0;
      for (int64_t k = 0; k < group; ++k) {
        const double q = s > 0 ? std::clamp(std::nearbyint((v[k] - m) / s), 0.0, 15.0) : 0.0;
        const double e =
            v[k] - std::fma(static_cast<float>(q), static_cast<float>(s), static_cast<float>(m));
        sum += e * e;
      }
      sse[r][g] = sum;
    }
  }
  return sse;
}

TEST_CASE("int4 quantize -> dequantize: no group worse than its full range and codes nearest",
          "[engine][quantize][int4]") {
  torch::manual_seed(4);
  double chosen_total = 0, full_total = 0;
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& [out, in, group] : {std::tuple<int64_t, int64_t, int64_t>{1, 32, 32},
                                         {7, 96, 32},
                                         {64, 576, 64},
                                         {5, 256, 128},
                                         {3, 4864, 64}}) {
      INFO(c10::toString(dtype) << " " << out << "x" << in << " group " << group);
      // Rows of different sizes, skewed (a positive mean) in some groups.
      at::Tensor w = at::randn({out, in})
                         .mul_(at::rand({out, 1}).mul_(3))
                         .add_(at::rand({out, in / group, 1})
                                   .expand({out, in / group, group})
                                   .reshape({out, in}));
      w[0].narrow(0, 0, group).zero_();  // a group of zeros: codes 0, exactly 0 back
      if (in >= 2 * group) w[0].narrow(0, group, group).fill_(0.3f);  // one value
      w = w.to(dtype);
      const QuantizedGroups q = QuantizeRowsInt4(w, group);
      REQUIRE(q.values.scalar_type() == at::kByte);
      REQUIRE(q.params.scalar_type() == at::kBFloat16);
      REQUIRE(q.values.sizes() == at::IntArrayRef({out, in / 2}));
      REQUIRE(q.params.sizes() == at::IntArrayRef({out, in / group, 2}));
      const at::Tensor wd = w.to(at::kDouble).view({out, in / group, group});
      const at::Tensor p = q.params.to(at::kDouble);
      const at::Tensor s = p.select(2, 0).unsqueeze(2), m = p.select(2, 1).unsqueeze(2);
      CHECK(s.min().item<double>() >= 0.0);
      // As the kernels dequantize (fma(q, s, m), one rounding): each weight
      // at its nearest level of [m, m + 15 s], so within half a scale of it
      // inside the range and at the nearer end outside (clipped), to half a
      // float32 ulp.
      const at::Tensor deq = DequantizeRowsInt4(q.values, q.params).to(at::kDouble);
      const at::Tensor deq3 = deq.view({out, in / group, group});
      const at::Tensor err = (wd - deq3).abs();
      const at::Tensor outside = (m - wd).clamp_min(0) + (wd - (m + 15 * s)).clamp_min(0);
      CHECK((err - s / 2 - outside - deq3.abs() * 0x1p-24).max().item<double>() <= 0.0);
      CHECK(deq[0].narrow(0, 0, group).abs().max().item<double>() == 0.0);
      // Every group's squared error at most the full range's; the two differ
      // where the search found better. Up to the order of summation and to
      // a code's choice at a tie (which float32's rounding of the levels
      // can turn: a few float32 ulps of the largest level times s).
      const at::Tensor sse = (wd - deq3).pow(2).sum(2);
      const at::Tensor full = FullRangeErrors(w.to(at::kFloat), group);
      const at::Tensor level = (m.abs() + 15 * s).squeeze(2);
      const at::Tensor slack = full * 1e-12 + s.squeeze(2) * level * 0x1p-20;
      CHECK((sse - full - slack).max().item<double>() <= 0.0);
      chosen_total += sse.sum().item<double>();
      full_total += full.sum().item<double>();
    }
  }
  // And less in all, the search's point (measured: 0.84).
  INFO("squared error, chosen / full range: " << chosen_total / full_total);
  CHECK(chosen_total <= 0.9 * full_total);
  CHECK_THROWS_AS(QuantizeRowsInt4(at::randn({2, 96}), 64), std::invalid_argument);
  CHECK_THROWS_AS(QuantizeRowsInt4(at::randn({2, 96}), 48), std::invalid_argument);
}

TEST_CASE("int4 weights take at most 0.3 of their bf16 bytes", "[engine][quantize][int4]") {
  // Qwen2.5-0.5B's gate/up stack: 0.5 + 4 / 64 bytes a weight against 2.
  const at::Tensor w = at::randn({2 * 4864, 896}).to(at::kBFloat16);
  const QuantizedGroups q = QuantizeRowsInt4(w, kInt4DefaultGroup);
  CHECK(Bytes(q.values) + Bytes(q.params) <= 0.3 * static_cast<double>(Bytes(w)));
  // A whole model, groups of the default 64: parameter_bytes go down by what
  // the projections save.
  const fs::path dir = medq::test::ModelFixture("tiny-llama");
  const auto bf16 = MustLoad(dir, "bf16");
  const auto int4 = MustLoadInt4(dir, "bf16", kInt4DefaultGroup);
  int64_t full = 0, quantized = 0;
  for (size_t i = 0; i < bf16->weights.layers.size(); ++i) {
    const LayerWeights& a = bf16->weights.layers[i];
    const LayerWeights& b = int4->weights.layers[i];
    full += Bytes(a.qkv_proj) + Bytes(a.o_proj) + Bytes(a.gate_up_proj) + Bytes(a.down_proj);
    quantized += Bytes(b.qkv_proj) + Bytes(b.o_proj) + Bytes(b.gate_up_proj) + Bytes(b.down_proj) +
                 Bytes(b.qkv_scale) + Bytes(b.o_scale) + Bytes(b.gate_up_scale) +
                 Bytes(b.down_scale);
    CHECK(b.gate_up_scale.size(1) * kInt4DefaultGroup == a.gate_up_proj.size(1));
  }
  CHECK(quantized <= 0.3 * static_cast<double>(full));
  CHECK(Info(*int4).parameter_bytes == Info(*bf16).parameter_bytes - full + quantized);
  CHECK(Info(*int4).quantization == "int4");
}

TEST_CASE("int4 groups that do not divide a matrix are refused, naming the model",
          "[engine][quantize][int4]") {
  // tiny-qwen2's hidden size is 32: groups of 64 do not divide it.
  const fs::path dir = medq::test::ModelFixture("tiny-qwen2");
  LoadOptions o{"cpu", "bf16"};
  o.quantize = "int4";
  auto r = LoadModel(dir, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("tiny-qwen2") && Catch::Contains("groups of 64") &&
                                    Catch::Contains("has 32"));
  for (const int64_t group : {16, 48, 256}) {
    INFO("group " << group);
    o.quantize_group = group;
    r = LoadModel(medq::test::ModelFixture("tiny-llama"), o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message,
               Catch::Contains("tiny-llama") && Catch::Contains("not one of 32, 64, 128"));
  }
  // The same through an adapter merge: the merged model is not kept.
  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  const auto merged = ApplyAdapter(base, medq::test::ModelFixture("tiny-llama-lora"), "int4", 48);
  REQUIRE_FALSE(merged.ok());
  CHECK_THAT(merged.error().message, Catch::Contains("not one of 32, 64, 128"));
}

// The int4 models' logits against the full-precision ones, every fixture,
// groups of 32 (the fixtures' widths are 32 to 128). A weight moves by at
// most half its group's step, 1/30 of the group's range (int8's is 1/254 of
// the row's largest weight: about 17 times finer); through these tiny
// random-weight models that moved the logits by 21 to 41% (relative L2) and
// at most 58% of the largest logit (measured with x unrounded; int8's 1.6 to
// 3.8% and 6.3% times about 17), and with x rounded as the kernels round it
// (below) up to 46% and 68%; the bounds are 75% and 100%.
// What the int4 kernels compute is checked tighter, against the dequantized
// model in float32. They round x to int8 in blocks of 32 (dense_kernels.h),
// a step of 1/254 of a block's largest value, as int8 rounds a row's
// weights: int8's bounds, 10% of the largest logit and 5% relative L2
// (measured: 2.9 to 5.8% of the largest); a wrong nibble, group or minimum
// moves them by the logits' whole size.
const Quantized kInt4{
    [](const fs::path& dir, const std::string& dtype) { return MustLoadInt4(dir, dtype); },
    at::kByte,
    1.0,
    0.75,
    kXRoundingMaxDiff,
    kXRoundingRelL2};

TEST_CASE("an int4 model's logits are close to the full-precision model's",
          "[engine][quantize][int4]") {
  CheckLogitsClose(kInt4);
}

TEST_CASE("an int4 model decodes the same through the decode step and the LibTorch path",
          "[engine][quantize][int4]") {
  CheckDecodeStepAgrees(kInt4);
}

TEST_CASE("a batched int4 decode is bitwise a solo run", "[engine][quantize][int4][batch]") {
  CheckBatchedIsSolo(kInt4);
}

TEST_CASE("an adapter merges in full precision, then the merged model is quantized to int4",
          "[engine][quantize][int4][lora]") {
  const fs::path adapter = medq::test::ModelFixture("tiny-llama-lora");
  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  auto merged = ApplyAdapter(base, adapter);
  auto merged_int4 = ApplyAdapter(base, adapter, "int4");  // groups of 64
  REQUIRE(merged.ok());
  REQUIRE(merged_int4.ok());
  CHECK(Info(**merged_int4).quantization == "int4");
  CHECK(base->weights.layers[0].qkv_proj.scalar_type() == at::kFloat);
  const auto ref = ReadTensors(adapter / "reference.safetensors");
  const at::Tensor ids = ref.at("input_ids_prompt1");
  const at::Tensor a = AllLogits(**merged_int4, ids);
  const at::Tensor b = AllLogits(**merged, ids);
  // The bounds of the fixtures' test above (measured here: 38% relative L2).
  INFO("relative L2 " << (a - b).norm().item<double>() / b.norm().item<double>());
  CHECK(MaxAbsDiff(a, b) <= kInt4.max_diff * b.abs().max().item<double>());
  CHECK((a - b).norm().item<double>() <= kInt4.rel_l2 * b.norm().item<double>());
  const at::Tensor d = AllLogits(*Dequantized(**merged, **merged_int4), ids);
  CHECK(MaxAbsDiff(a, d) <= kInt4.kernel_max_diff * d.abs().max().item<double>());
  CHECK((a - d).norm().item<double>() <= kInt4.kernel_rel_l2 * d.norm().item<double>());
}

}  // namespace
}  // namespace medq::engine::test
