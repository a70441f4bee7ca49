// The fixture references on a CUDA device (label "gpu"; needs a CUDA LibTorch
// and a visible device, otherwise each case is reported as skipped): solo
// runs, the continuous batch (batch invariance), seeded sampling, the
// decode step's CUDA graph against the same step run eagerly, the fused
// kernels against their references, and embeddings against the CPU's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "daemon/engine/batch.h"
#include "daemon/engine/decode_graph.h"
#include "daemon/engine/device_memory.h"
#include "daemon/engine/embedding.h"
#include "daemon/engine/fused_ops.h"
#include "daemon/engine/parameter_estimate.h"
#include "daemon/engine/static_rows.h"
#include "daemon/engine/transformer.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

namespace medq::engine::test {
namespace {

constexpr const char* kNoCuda = "no CUDA device visible (or a LibTorch without CUDA)";

int64_t AllocatedOnDevice0() {
  return QueryDeviceMemory().at(0).allocated_bytes;
}

TEST_CASE("a captured decode graph steps as the eager static step does", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  c10::InferenceMode guard;
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    auto graphed = LoadModel(dir, {"cuda:0", "fp32"});
    auto eager = LoadModel(dir, {"cuda:0", "fp32"});
    REQUIRE(graphed.ok());
    REQUIRE(eager.ok());
    // Three sequences at their own positions (a bucket of four, one row of
    // padding), each with a cache for the graph and one for the eager step.
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<int64_t> next;
    for (const std::string p : {"prompt1", "prompt2", "prompt1"}) {
      const at::Tensor ids = ref.at("input_ids_" + p).view({1, -1}).to(at::kLong);
      for (const Model* model : {&**graphed, &**eager}) {
        caches.push_back(std::make_unique<KvCache>(*model, 1, ids.size(1) + 12, true));
        const at::Tensor logits = Forward(*model, ids, *caches.back(), LogitsFor::kLastPosition);
        if (model == &**graphed) next.push_back(logits.view({-1}).argmax().item<int64_t>());
      }
    }
    DecodeGraphs& graph = DecodeGraphsOf(**graphed);
    DecodeGraphs& plain = DecodeGraphsOf(**eager);
    // Steps of rows {0, 1, 2}, then {2, 0} (another bucket), then {1, 2, 0}:
    // the bucket of four replays its graph bound to other rows.
    const std::vector<std::vector<size_t>> plan = {{0, 1, 2}, {0, 1, 2}, {0, 1, 2},
                                                   {2, 0},    {1, 2, 0}, {1, 2, 0}};
    for (size_t step = 0; step < plan.size(); ++step) {
      INFO("step " << step);
      std::vector<KvCache*> a_rows, b_rows;
      std::vector<int64_t> ids;
      for (const size_t i : plan[step]) {
        a_rows.push_back(caches[2 * i].get());
        b_rows.push_back(caches[2 * i + 1].get());
        ids.push_back(next[i]);
      }
      const at::Tensor input = at::tensor(ids, at::kLong).to(at::Device("cuda:0"));
      SetDecodeGraphCaptureEnabled(true);
      const at::Tensor a = graph.Step(a_rows, input).cpu();
      SetDecodeGraphCaptureEnabled(false);
      const at::Tensor b = plain.Step(b_rows, input).cpu();
      SetDecodeGraphCaptureEnabled(true);
      CHECK(MaxAbsDiff(a, b) <= 1e-4);
      const at::Tensor chosen = a.argmax(1);
      for (size_t r = 0; r < plan[step].size(); ++r)
        next[plan[step][r]] = chosen[static_cast<int64_t>(r)].item<int64_t>();
    }
    CHECK(graph.captured(4));
    CHECK(graph.captured(2));
    CHECK_FALSE(plain.captured(4));
  }
  const DecodeGraphCounts counts = DecodeGraphStats();
  CAPTURE(counts.first_failure);
  CHECK(counts.failed == 0);
  CHECK(counts.captured >= 2);
}

// The fused kernels (fused_ops.h) against the LibTorch ops they replace, on
// random rows, three sequences at their own positions in caches of their own
// (read through the row tables), for every fixture (Qwen3's q/k norms,
// Qwen2's biases, GQA) in fp32 and bf16.
TEST_CASE("fused decode kernels equal their LibTorch references on cuda:0", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  c10::InferenceMode guard;
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      auto m = LoadModel(dir, {"cuda:0", dtype});
      REQUIRE(m.ok());
      const Model& model = **m;
      REQUIRE(FusedKernelsApply(model));
      const ModelConfig& c = model.config;
      // fp32: float rounding. bf16: the kernels round once where the ops
      // round after each step: up to two bf16 ulps of the largest value.
      const auto tolerance_for = [&](const at::Tensor& reference) {
        const double largest = std::max(1.0, reference.abs().max().item<double>());
        return dtype == "fp32" ? 1e-4 * largest : 1.6e-2 * largest;
      };
      const auto opts = at::TensorOptions().dtype(model.compute_dtype).device(model.device);
      const int64_t width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
      // Each path's three caches, of other capacities, filled at positions
      // 0, 5 and 11 onwards.
      std::vector<std::unique_ptr<KvCache>> fused, reference;
      for (const int64_t capacity : {40, 33, 47}) {
        fused.push_back(std::make_unique<KvCache>(model, 1, capacity, true));
        reference.push_back(std::make_unique<KvCache>(model, 1, capacity, true));
      }
      for (KvCache* cache : {fused[1].get(), reference[1].get()})
        cache->Advance(5);
      for (KvCache* cache : {fused[2].get(), reference[2].get()})
        cache->Advance(11);
      const std::vector<KvCache*> a_rows = {fused[0].get(), fused[1].get(), fused[2].get()};
      const std::vector<KvCache*> b_rows = {reference[0].get(), reference[1].get(),
                                            reference[2].get()};
      StaticStepInputs a_in = AllocateStepInputs(model, 3), b_in = AllocateStepInputs(model, 3);
      at::manual_seed(7);
      for (int step = 0; step < 20; ++step) {  // fill the caches through each path
        Upload(BindingOf(model, a_rows, 3), true, a_in);
        Upload(BindingOf(model, b_rows, 3), true, b_in);
        const at::Tensor qkv = at::randn({3, 1, width}, opts);
        for (size_t layer = 0; layer < model.weights.layers.size(); ++layer) {
          const LayerWeights& l = model.weights.layers[layer];
          SetFusedKernelsEnabled(true);
          const at::Tensor qa = RopeCacheWrite(model, l, layer, qkv, a_in, a_rows);
          const at::Tensor oa = DecodeAttention(model, layer, qa, a_in, a_rows);
          SetFusedKernelsEnabled(false);
          const at::Tensor qb = RopeCacheWrite(model, l, layer, qkv, b_in, b_rows);
          const at::Tensor ob = DecodeAttention(model, layer, qb, b_in, b_rows);
          SetFusedKernelsEnabled(true);
          CHECK(qa.sizes() == qb.sizes());
          CHECK(MaxAbsDiff(qa.cpu(), qb.cpu()) <= tolerance_for(qb));
          for (size_t i = 0; i < 3; ++i) {
            CHECK(MaxAbsDiff(fused[i]->keys(layer).cpu(), reference[i]->keys(layer).cpu()) <=
                  tolerance_for(reference[i]->keys(layer)));
            CHECK(MaxAbsDiff(fused[i]->values(layer).cpu(), reference[i]->values(layer).cpu()) ==
                  0);
          }
          CHECK(oa.sizes() == ob.sizes());
          CHECK(MaxAbsDiff(oa.cpu(), ob.cpu()) <= tolerance_for(ob));
        }
        for (size_t i = 0; i < 3; ++i) {
          fused[i]->Advance(1);
          reference[i]->Advance(1);
        }
      }
      const at::Tensor gate_up = at::randn({3, 1, 2 * c.intermediate_size}, opts);
      SetFusedKernelsEnabled(true);
      const at::Tensor a = SiluMul(gate_up, c.intermediate_size).cpu();
      SetFusedKernelsEnabled(false);
      const at::Tensor b = SiluMul(gate_up, c.intermediate_size).cpu();
      SetFusedKernelsEnabled(true);
      CHECK(a.sizes() == b.sizes());
      CHECK(MaxAbsDiff(a, b) <= tolerance_for(b));
      // The decode projections: 1 to 16 rows, with and without a bias, with
      // the norm or SiLU·up in the same pass, and added into a residual,
      // against Linear, RmsNorm, SiluMul and LinearAddInto.
      const LayerWeights& l = model.weights.layers[0];
      for (const int64_t rows : {1, 2, 3, 8, 11, 16}) {
        INFO("rows " << rows);
        const at::Tensor x = at::randn({rows, 1, c.hidden_size}, opts);
        for (const at::Tensor& bias : {l.qkv_bias, at::Tensor()}) {
          SetFusedKernelsEnabled(true);
          const at::Tensor ya = DecodeLinear(model, x, l.qkv_proj, bias).cpu();
          const at::Tensor na =
              DecodeNormLinear(model, x, l.input_norm, c.rms_norm_eps, l.qkv_proj, bias).cpu();
          SetFusedKernelsEnabled(false);
          const at::Tensor yb = DecodeLinear(model, x, l.qkv_proj, bias).cpu();
          const at::Tensor nb =
              DecodeNormLinear(model, x, l.input_norm, c.rms_norm_eps, l.qkv_proj, bias).cpu();
          CHECK(ya.sizes() == yb.sizes());
          CHECK(MaxAbsDiff(ya, yb) <= tolerance_for(yb));
          CHECK(na.sizes() == nb.sizes());
          CHECK(MaxAbsDiff(na, nb) <= tolerance_for(nb));
        }
        const at::Tensor act = at::randn({rows, 1, c.intermediate_size}, opts);
        at::Tensor ra = at::randn({rows, 1, c.hidden_size}, opts);
        at::Tensor rb = ra.clone();
        SetFusedKernelsEnabled(true);
        DecodeLinearAddInto(model, ra, act, l.down_proj, l.down_bias);
        SetFusedKernelsEnabled(false);
        DecodeLinearAddInto(model, rb, act, l.down_proj, l.down_bias);
        CHECK(MaxAbsDiff(ra.cpu(), rb.cpu()) <= tolerance_for(rb));
        const at::Tensor gu = at::randn({rows, 1, 2 * c.intermediate_size}, opts);
        at::Tensor sa = at::randn({rows, 1, c.hidden_size}, opts);
        at::Tensor sb = sa.clone();
        SetFusedKernelsEnabled(true);
        DecodeSiluLinearAddInto(model, sa, gu, l.down_proj, l.down_bias);
        SetFusedKernelsEnabled(false);
        DecodeSiluLinearAddInto(model, sb, gu, l.down_proj, l.down_bias);
        CHECK(MaxAbsDiff(sa.cpu(), sb.cpu()) <= tolerance_for(sb));
        SetFusedKernelsEnabled(true);
        const at::Tensor la = DecodeNormLinear(model, x, model.weights.norm, c.rms_norm_eps,
                                               model.weights.lm_head, at::Tensor())
                                  .cpu();
        SetFusedKernelsEnabled(false);
        const at::Tensor lb = DecodeNormLinear(model, x, model.weights.norm, c.rms_norm_eps,
                                               model.weights.lm_head, at::Tensor())
                                  .cpu();
        CHECK(MaxAbsDiff(la, lb) <= tolerance_for(lb));
      }
      // A wider matrix than the fixtures' (2048 columns, 300 rows, which no
      // block of rows divides): each weight row split over several warps.
      for (const int64_t rows : {1, 5, 16}) {
        INFO("wide, rows " << rows);
        const at::Tensor w = at::randn({300, 2048}, opts) * 0.05;
        const at::Tensor bias = at::randn({300}, opts);
        const at::Tensor norm = at::randn({2048}, opts);
        const at::Tensor x = at::randn({rows, 1, 2048}, opts);
        const at::Tensor gu = at::randn({rows, 1, 4096}, opts);
        const at::Tensor r0 = at::randn({rows, 1, 300}, opts);
        at::Tensor y[2], n[2], s[2];
        for (const int kernels : {1, 0}) {
          SetFusedKernelsEnabled(kernels == 1);
          y[kernels] = DecodeLinear(model, x, w, bias).cpu();
          n[kernels] = DecodeNormLinear(model, x, norm, c.rms_norm_eps, w, bias).cpu();
          at::Tensor r = r0.clone();
          DecodeSiluLinearAddInto(model, r, gu, w, bias);
          s[kernels] = r.cpu();
        }
        SetFusedKernelsEnabled(true);
        CHECK(MaxAbsDiff(y[1], y[0]) <= tolerance_for(y[0]));
        CHECK(MaxAbsDiff(n[1], n[0]) <= tolerance_for(n[0]));
        CHECK(MaxAbsDiff(s[1], s[0]) <= tolerance_for(s[0]));
      }
      SetFusedKernelsEnabled(true);
    }
  }
}

// The split attention kernel (flash-decoding, MEDQ_ATTENTION_SPLITS) against
// the reference and the one-split kernel, over caches long enough for many
// chunks: rows at positions 0, 63, 64, 600 and 1000 (one key, a chunk's
// edges, many chunks, splits past the last key), every slot of each cache
// random (the slots past a row's position must not count), with and
// without a sliding window of 100 keys, in fp32 and bf16.
TEST_CASE("split decode attention equals its reference over long caches", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  c10::InferenceMode guard;
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      auto m = LoadModel(dir, {"cuda:0", dtype});
      REQUIRE(m.ok());
      const Model& model = **m;
      // A copy of the model that attends over its last 100 keys only.
      Model windowed = model;
      windowed.config.sliding_window = 100;
      REQUIRE(FusedKernelsApply(model));
      const ModelConfig& c = model.config;
      const auto opts = at::TensorOptions().dtype(model.compute_dtype).device(model.device);
      at::manual_seed(11);
      std::vector<std::unique_ptr<KvCache>> caches;
      std::vector<KvCache*> rows;
      for (const int64_t length : {0, 63, 64, 600, 1000}) {
        caches.push_back(std::make_unique<KvCache>(model, 1, length + 37, true));
        for (size_t layer = 0; layer < model.weights.layers.size(); ++layer) {
          caches.back()->keys(layer).normal_();
          caches.back()->values(layer).normal_();
        }
        caches.back()->Advance(length);
        rows.push_back(caches.back().get());
      }
      StaticStepInputs in = AllocateStepInputs(model, static_cast<int64_t>(rows.size()));
      Upload(BindingOf(model, rows, rows.size()), true, in);
      const at::Tensor q =
          at::randn({static_cast<int64_t>(rows.size()), c.num_heads, 1, c.head_dim}, opts);
      for (const Model* attending : {&model, static_cast<const Model*>(&windowed)}) {
        INFO("window " << attending->config.sliding_window.value_or(0));
        for (const size_t layer : {size_t{0}, model.weights.layers.size() - 1}) {
          SetFusedKernelsEnabled(false);
          const at::Tensor reference = DecodeAttention(*attending, layer, q, in, rows).cpu();
          SetFusedKernelsEnabled(true);
          const double largest = std::max(1.0, reference.abs().max().item<double>());
          const double tolerance = dtype == "fp32" ? 1e-4 * largest : 1.6e-2 * largest;
          at::Tensor one_split;
          for (const int splits : {1, 2, 3, 16, 64, kAttentionSplitsAuto}) {
            INFO("splits " << splits);
            SetAttentionSplits(splits);
            const at::Tensor got = DecodeAttention(*attending, layer, q, in, rows).cpu();
            REQUIRE(got.sizes() == reference.sizes());
            CHECK(MaxAbsDiff(got, reference) <= tolerance);
            if (splits == 1) one_split = got;
            // Only the grouping of float32 sums differs from one split.
            if (dtype == "fp32") CHECK(MaxAbsDiff(got, one_split) <= 1e-5 * largest);
          }
          SetAttentionSplits(kAttentionSplitsFromEnvironment);
        }
      }
    }
  }
}

// The embedding batcher's forward pass runs where the model is: on a GPU
// the same vectors as on the CPU, within 1e-4, for a padded batch of
// texts of different lengths.
TEST_CASE("embeddings on cuda:0 equal the CPU's", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  const fs::path data = fs::path(MEDQ_ENGINE_TEST_DATA) / "embeddings";
  for (const char* name : {"tiny-bert", "tiny-mpnet"}) {
    INFO(name);
    auto cpu = LoadEmbeddingModel(data / name, {"cpu", "fp32"});
    auto gpu = LoadEmbeddingModel(data / name, {"cuda:0", "fp32"});
    REQUIRE(cpu.ok());
    REQUIRE(gpu.ok());
    CHECK(Info(**gpu).device == "cuda:0");
    const int64_t vocab = Info(**cpu).vocab_size;
    std::vector<std::vector<int32_t>> texts;
    for (const int length : {3, 7, 12, 1}) {
      std::vector<int32_t> ids;
      for (int i = 0; i < length; ++i)
        ids.push_back(static_cast<int32_t>(5 + (i * 7919 + length * 31) % (vocab - 5)));
      texts.push_back(ids);
    }
    auto a = Embed(**cpu, texts);
    auto b = Embed(**gpu, texts);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->size() == b->size());
    for (size_t t = 0; t < a->size(); ++t) {
      INFO("text " << t);
      REQUIRE((*a)[t].size() == (*b)[t].size());
      double worst = 0;
      for (size_t i = 0; i < (*a)[t].size(); ++i)
        worst = std::max(worst, std::fabs(double((*a)[t][i]) - (*b)[t][i]));
      CHECK(worst <= 1e-4);
    }
  }
}

TEST_CASE("fixture models match transformers on cuda:0 in fp32", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    auto m = LoadModel(dir, {"cuda:0", "fp32"});
    REQUIRE(m.ok());
    CHECK(Info(**m).device == "cuda:0");
    for (const std::string p : {"prompt1", "prompt2"}) {
      INFO(p);
      const at::Tensor ids = ref.at("input_ids_" + p);
      CHECK(MaxAbsDiff(AllLogits(**m, ids).cpu(), ref.at("logits_" + p)) <= 2e-3);
      CHECK(Greedy(**m, ToIds(ids), 24) == ToIds(ref.at("greedy_" + p)));
    }
  }
}

// int8 and int4 weights (LoadOptions::quantize) on a GPU
// (device_quantized.h), with and without quantize_embeddings: quantized in
// host memory and moved, the bytes the estimate counts; the int8 GEMV
// and LibTorch's int4 kernel against the same quantized model on the CPU
// (medq's kernels, float32 activations) over a whole prompt (prefill's
// GEMM paths); greedy generation (the GEMV, one row a step) runs and
// reproduces; and an adapter merges before quantizing. The bound: bf16
// activations on the GPU against float32 on the CPU, 2e-2 of the largest
// logit (a wrong code, group, scale or row moves them by their whole size).
TEST_CASE("int8 and int4 on cuda:0 give the CPU's quantized logits", "[engine][gpu][quantize]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  for (const std::string q : {"int8", "int4"}) {
    for (const char* name : {"tiny-llama", "tiny-qwen2"}) {  // untied, tied
      for (const bool embeddings : {false, true}) {
        INFO(q << " " << name << (embeddings ? " with quantize_embeddings" : ""));
        const fs::path dir = medq::test::ModelFixture(name);
        LoadOptions gpu{"cuda:0", "bf16"};
        gpu.quantize = q;
        gpu.quantize_group = 32;
        gpu.quantize_embeddings = embeddings;
        LoadOptions cpu = gpu;
        cpu.device = "cpu";
        auto on_gpu = LoadModel(dir, gpu);
        REQUIRE(on_gpu.ok());
        auto on_cpu = LoadModel(dir, cpu);
        REQUIRE(on_cpu.ok());
        CHECK(Info(**on_gpu).quantization == q);
        CHECK(Info(**on_gpu).quantized_embeddings == embeddings);
        // The estimate before a load counts what the GPU holds, to the byte.
        const auto config = LoadModelConfig(dir);
        REQUIRE(config.ok());
        WeightLayout layout;
        layout.vector_element_bytes = 2;  // bf16 norms and biases
        layout.quantize = q;
        layout.quantize_group = 32;
        layout.quantize_embeddings = embeddings;
        layout.gpu_layout = true;
        CHECK(EstimateParameterBytes(*config, layout) == Info(**on_gpu).parameter_bytes);
        const auto ref = ReadTensors(dir / "reference.safetensors");
        const at::Tensor ids = ref.at("input_ids_prompt1");
        const at::Tensor a = AllLogits(**on_gpu, ids).to(at::kCPU, at::kFloat);
        const at::Tensor b = AllLogits(**on_cpu, ids);
        INFO("max diff " << MaxAbsDiff(a, b) / b.abs().max().item<double>() << " of the largest");
        CHECK(MaxAbsDiff(a, b) <= 2e-2 * b.abs().max().item<double>());
        const std::vector<int32_t> first = Greedy(**on_gpu, ToIds(ids), 16);
        CHECK(first.size() == 16);
        CHECK(Greedy(**on_gpu, ToIds(ids), 16) == first);
      }
    }
  }
  // An adapter merges in full precision on the device, then quantizes.
  auto base = LoadModel(medq::test::ModelFixture("tiny-llama"), {"cuda:0", "bf16"});
  REQUIRE(base.ok());
  auto adapted =
      ApplyAdapter(*base, medq::test::ModelFixture("tiny-llama-lora"), "int4", 32, false);
  REQUIRE(adapted.ok());
  CHECK(Info(**adapted).quantization == "int4");
  CHECK(Greedy(**adapted, {1, 6989, 9503, 21829}, 8).size() == 8);
  // Or merged and quantized on the CPU (a base too big for the GPU in full
  // precision), and only the quantized model placed on the GPU, in bf16.
  const auto cpu_base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  auto placed = ApplyAdapter(cpu_base, medq::test::ModelFixture("tiny-llama-lora"), "int4", 32,
                             false, "cuda:0", "bf16");
  REQUIRE(placed.ok());
  CHECK(Info(**placed).device == "cuda:0");
  CHECK(Info(**placed).dtype == "bf16");
  auto on_cpu = ApplyAdapter(cpu_base, medq::test::ModelFixture("tiny-llama-lora"), "int4", 32);
  REQUIRE(on_cpu.ok());
  const at::Tensor ids = at::tensor({1, 6989, 9503, 21829, 338}, at::kLong);
  const at::Tensor a = AllLogits(**placed, ids).to(at::kCPU, at::kFloat);
  const at::Tensor b = AllLogits(**on_cpu, ids);
  CHECK(MaxAbsDiff(a, b) <= 2e-2 * b.abs().max().item<double>());
}

TEST_CASE("bf16 on cuda:0 runs, seeds reproduce, and memory is returned", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  auto m = LoadModel(medq::test::ModelFixture("tiny-llama"), {"cuda", "auto"});
  REQUIRE(m.ok());
  CHECK(Info(**m).dtype == "bf16");
  GenerateRequest r;
  r.prompt = {1, 6989, 9503, 21829};
  r.max_new_tokens = 32;
  r.stop_ids = std::vector<int32_t>{};
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 5;
  std::vector<int32_t> a, b;
  // The first run leaves what LibTorch allocates once and keeps (cuBLAS's
  // workspace, for one); from then on each run returns all it allocated.
  REQUIRE(Generate(**m, r, [&](int32_t id) { return a.push_back(id), true; }).ok());
  const int64_t before = AllocatedOnDevice0();
  REQUIRE(Generate(**m, r, [&](int32_t id) { return b.push_back(id), true; }).ok());
  CHECK(a.size() == 32);
  CHECK(a == b);
  CHECK(AllocatedOnDevice0() == before);
  // The adapter merges on the device too.
  auto adapted = ApplyAdapter(*m, medq::test::ModelFixture("tiny-llama-lora"));
  CHECK(adapted.ok());
}

// The generic LibTorch path: one batched linear per projection, attention per
// sequence. Sequences of different lengths join at different steps; each
// gives its solo greedy tokens (and, in fp32, the transformers references),
// and the batch's memory is returned when it ends.
TEST_CASE("batched decoding on cuda:0 gives the reference and solo tokens", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      const auto ref = ReadTensors(dir / "reference.safetensors");
      const auto model = MustLoad(dir, dtype, "cuda:0");
      const std::vector<Joining> requests = MixedRequests(ref);
      RunBatch(model, BatchOptions{}, requests);  // leaves cuBLAS's workspace
      const int64_t before = AllocatedOnDevice0();
      const std::vector<Outcome> out = RunBatch(model, BatchOptions{}, requests);
      CHECK(AllocatedOnDevice0() == before);
      for (size_t i = 0; i < requests.size(); ++i) {
        INFO("sequence " << i);
        const GenerateRequest& r = requests[i].request;
        REQUIRE(out[i].result.has_value());
        CHECK(out[i].result->new_tokens == r.max_new_tokens);
        CHECK(out[i].tokens == Greedy(*model, r.prompt, r.max_new_tokens));
      }
      if (dtype == "fp32") {
        CHECK(out[0].tokens == Ids(ref, "greedy_prompt1"));
        CHECK(out[1].tokens == Ids(ref, "greedy_prompt2"));
      }
    }
  }
}

TEST_CASE("seeded sampling on cuda:0 gives the same tokens batched and alone", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  const auto dir = ModelFolders().front();
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir, "fp32", "cuda:0");
  const std::vector<Joining> requests = SeededMixedRequests(ref);
  CheckEachAsAlone(*model, requests, RunBatch(model, BatchOptions{}, requests));
}

}  // namespace
}  // namespace medq::engine::test
