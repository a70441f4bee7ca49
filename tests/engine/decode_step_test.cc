// The CPU decode step (decode_step.h) against Forward()'s LibTorch path, one
// step from the same cache, for every fixture model in fp32 and with bf16
// weights. reference_test.cc checks the same step against transformers.
#include <catch2/catch.hpp>

#include "daemon/engine/decode_step.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// Turns the decode step off for its scope.
class LibTorchPathOnly : public ScopedSwitch {
 public:
  LibTorchPathOnly() : ScopedSwitch(&SetCpuDecodeStepEnabled, false, true) {}
};

// Prefills prompt[0, n), then decodes prompt[n] (LibTorch path or decode
// step), then prompt[n + 1]: returns the last step's logits and leaves the
// two keys/values the steps wrote in `kv` (keys then values of layer 0).
at::Tensor TwoSteps(const Model& m, const at::Tensor& prompt, int64_t n, bool decode_step,
                    at::Tensor* kv) {
  c10::InferenceMode guard;
  KvCache cache(m, 1, n + 2);
  {
    LibTorchPathOnly prefill_path;
    Forward(m, prompt.narrow(0, 0, n).view({1, -1}), cache, LogitsFor::kLastPosition);
  }
  std::optional<LibTorchPathOnly> step_path;
  if (!decode_step) step_path.emplace();
  REQUIRE(CpuDecodeStepApplies(m, cache) == decode_step);
  Forward(m, prompt[n].view({1, 1}), cache, LogitsFor::kLastPosition);
  at::Tensor logits = Forward(m, prompt[n + 1].view({1, 1}), cache, LogitsFor::kLastPosition);
  *kv = at::cat({cache.keys(0).narrow(2, n, 2), cache.values(0).narrow(2, n, 2)}).clone();
  return logits.clone();
}

TEST_CASE("the CPU decode step computes what the LibTorch path computes", "[engine][decode]") {
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      const auto ref = ReadTensors(dir / "reference.safetensors");
      const auto model = MustLoad(dir, dtype);
      const at::Tensor prompt = ref.at("input_ids_prompt1").to(at::kLong);
      const int64_t n = prompt.numel() - 2;
      at::Tensor kv_fused, kv_torch;
      const at::Tensor fused = TwoSteps(*model, prompt, n, true, &kv_fused);
      const at::Tensor torch = TwoSteps(*model, prompt, n, false, &kv_torch);
      REQUIRE(fused.sizes() == torch.sizes());
      CHECK(SameLogits(fused, torch));
      CHECK(MaxAbsDiff(kv_fused, kv_torch) <= 1e-5 * kv_torch.abs().max().item<double>());
    }
  }
}

TEST_CASE("the CPU decode step stays out of what it does not cover", "[engine][decode]") {
  const auto model = MustLoad(ModelFolders().front(), "fp32");
  c10::InferenceMode guard;
  KvCache one(*model, 1, 4);
  CHECK(CpuDecodeStepApplies(*model, one));
  KvCache batch(*model, 2, 4);
  CHECK_FALSE(CpuDecodeStepApplies(*model, batch));
  {
    LibTorchPathOnly off;
    CHECK_FALSE(CpuDecodeStepApplies(*model, one));
  }
}

}  // namespace
}  // namespace medq::engine::test
