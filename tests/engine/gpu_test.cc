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
    auto m = LoadModel(dir, {"cuda:0", "fp32"});
    REQUIRE(m.ok());
    const Model& model = **m;
    // Two sequences at their own positions, each with a cache for the graph
    // and one for the eager step.
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<int64_t> next;
    for (const std::string p : {"prompt1", "prompt2"}) {
      const at::Tensor ids = ref.at("input_ids_" + p).view({1, -1}).to(at::kLong);
      for (int copy = 0; copy < 2; ++copy) {
        caches.push_back(std::make_unique<KvCache>(model, 1, ids.size(1) + 8, true));
        const at::Tensor logits = Forward(model, ids, *caches.back(), LogitsFor::kLastPosition);
        if (copy == 0) next.push_back(logits.view({-1}).argmax().item<int64_t>());
      }
    }
    DecodeGraph graph(model, {caches[0].get(), caches[2].get()});
    SetDecodeGraphCaptureEnabled(false);
    DecodeGraph eager(model, {caches[1].get(), caches[3].get()});
    at::Tensor ids = at::tensor(next, at::kLong).to(model.device);
    for (int step = 0; step < 6; ++step) {
      INFO("step " << step);
      SetDecodeGraphCaptureEnabled(true);
      const at::Tensor a = graph.Step(ids).cpu();
      SetDecodeGraphCaptureEnabled(false);
      const at::Tensor b = eager.Step(ids).cpu();
      CHECK(MaxAbsDiff(a, b) <= 1e-4);
      ids = a.argmax(1).to(model.device);
    }
    SetDecodeGraphCaptureEnabled(true);
    CHECK(graph.captured());
    CHECK_FALSE(eager.captured());
  }
  const DecodeGraphCounts counts = DecodeGraphStats();
  CAPTURE(counts.first_failure);
  CHECK(counts.failed == 0);
  CHECK(counts.captured >= 1);
}

// The fused kernels (fused_ops.h) against the LibTorch ops they replace, on
// random rows, at a position in the middle of a cache, for every fixture
// (Qwen3's q/k norms, Qwen2's biases, GQA) in fp32 and bf16.
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
      KvCache fused(model, 1, 40, true), reference(model, 1, 40, true);
      at::manual_seed(7);
      for (int64_t p = 0; p < 20; ++p) {  // fill both caches through each path
        const at::Tensor qkv = at::randn({1, 1, width}, opts);
        const at::Tensor position = at::full({1}, p, opts.dtype(at::kLong));
        for (size_t layer = 0; layer < model.weights.layers.size(); ++layer) {
          const LayerWeights& l = model.weights.layers[layer];
          SetFusedKernelsEnabled(true);
          const at::Tensor qa =
              RopeCacheWrite(model, l, layer, qkv, position, fused.cos(), fused.sin(), fused);
          const at::Tensor oa = DecodeAttention(model, layer, qa, position, fused);
          SetFusedKernelsEnabled(false);
          const at::Tensor qb = RopeCacheWrite(model, l, layer, qkv, position, reference.cos(),
                                               reference.sin(), reference);
          const at::Tensor ob = DecodeAttention(model, layer, qb, position, reference);
          SetFusedKernelsEnabled(true);
          CHECK(MaxAbsDiff(qa.cpu(), qb.cpu()) <= tolerance_for(qb));
          CHECK(MaxAbsDiff(fused.keys(layer).cpu(), reference.keys(layer).cpu()) <=
                tolerance_for(reference.keys(layer)));
          CHECK(MaxAbsDiff(fused.values(layer).cpu(), reference.values(layer).cpu()) == 0);
          CHECK(MaxAbsDiff(oa.cpu(), ob.cpu()) <= tolerance_for(ob));
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
      // The decode projections: 1 to 8 rows, with and without a bias, and
      // added into a residual, against Linear and LinearAddInto.
      const LayerWeights& l = model.weights.layers[0];
      for (const int64_t rows : {1, 2, 3, 8}) {
        INFO("rows " << rows);
        const at::Tensor x = at::randn({rows, 1, c.hidden_size}, opts);
        for (const at::Tensor& bias : {l.qkv_bias, at::Tensor()}) {
          SetFusedKernelsEnabled(true);
          const at::Tensor ya = DecodeLinear(model, x, l.qkv_proj, bias).cpu();
          SetFusedKernelsEnabled(false);
          const at::Tensor yb = DecodeLinear(model, x, l.qkv_proj, bias).cpu();
          CHECK(ya.sizes() == yb.sizes());
          CHECK(MaxAbsDiff(ya, yb) <= tolerance_for(yb));
        }
        const at::Tensor act = at::randn({rows, 1, c.intermediate_size}, opts);
        at::Tensor ra = at::randn({rows, 1, c.hidden_size}, opts);
        at::Tensor rb = ra.clone();
        SetFusedKernelsEnabled(true);
        DecodeLinearAddInto(model, ra, act, l.down_proj, l.down_bias);
        SetFusedKernelsEnabled(false);
        DecodeLinearAddInto(model, rb, act, l.down_proj, l.down_bias);
        CHECK(MaxAbsDiff(ra.cpu(), rb.cpu()) <= tolerance_for(rb));
        SetFusedKernelsEnabled(true);
        const at::Tensor la = DecodeLinear(model, x, model.weights.lm_head, at::Tensor()).cpu();
        SetFusedKernelsEnabled(false);
        const at::Tensor lb = DecodeLinear(model, x, model.weights.lm_head, at::Tensor()).cpu();
        CHECK(MaxAbsDiff(la, lb) <= tolerance_for(lb));
      }
      SetFusedKernelsEnabled(true);
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

// int8 weights (LoadOptions::quantize) run on the CPU only for now: on a
// GPU the load is refused, naming the model and why, and nothing stays on
// the device.
TEST_CASE("int8 on cuda:0 is refused, naming the model", "[engine][gpu][quantize]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  const int64_t before = AllocatedOnDevice0();
  LoadOptions o{"cuda:0", "bf16"};
  o.quantize = "int8";
  const auto r = LoadModel(medq::test::ModelFixture("tiny-llama"), o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("tiny-llama") && Catch::Contains("CPU only"));
  CHECK(AllocatedOnDevice0() == before);
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
