// The fixture references on a CUDA device (label "gpu"; needs a CUDA LibTorch
// and a visible device, otherwise each case is reported as skipped).
#include <catch2/catch.hpp>

#include "daemon/engine/device_memory.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

namespace medq::engine::test {
namespace {

constexpr const char* kNoCuda = "no CUDA device visible (or a LibTorch without CUDA)";

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

TEST_CASE("bf16 on cuda:0 runs, seeds reproduce, and memory is returned", "[engine][gpu]") {
  if (!CudaAvailable()) MEDQ_SKIP(kNoCuda);
  auto m = LoadModel(medq::test::ModelFixture("tiny-llama"), {"cuda", "auto"});
  REQUIRE(m.ok());
  CHECK(Info(**m).dtype == "bf16");
  const int64_t before = QueryDeviceMemory().at(0).allocated_bytes;
  GenerateRequest r;
  r.prompt = {1, 6989, 9503, 21829};
  r.max_new_tokens = 32;
  r.stop_ids = std::vector<int32_t>{};
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 5;
  std::vector<int32_t> a, b;
  REQUIRE(Generate(**m, r, [&](int32_t id) { return a.push_back(id), true; }).ok());
  REQUIRE(Generate(**m, r, [&](int32_t id) { return b.push_back(id), true; }).ok());
  CHECK(a.size() == 32);
  CHECK(a == b);
  CHECK(QueryDeviceMemory().at(0).allocated_bytes == before);
  // The adapter merges on the device too.
  auto adapted = ApplyAdapter(*m, medq::test::ModelFixture("tiny-llama-lora"));
  CHECK(adapted.ok());
}

}  // namespace
}  // namespace medq::engine::test
