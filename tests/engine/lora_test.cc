// The PEFT LoRA fixture: tiny-llama + adapter matches the adapted reference
// while the base model keeps matching its own.
#include <catch2/catch.hpp>

#include <tuple>

#include "daemon/engine/kernels/cpu_linear.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

const fs::path kAdapter = medq::test::ModelFixture("tiny-llama-lora");

TEST_CASE("a LoRA adapter matches its reference and leaves the base unchanged", "[engine][lora]") {
  // float32 weights: merged into bf16 ones the adapter's deltas would round
  // (the daemon's model store widens a bf16 CPU base before a merge).
  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  auto adapted = ApplyAdapter(base, kAdapter);
  REQUIRE(adapted.ok());
  const auto ref = ReadTensors(kAdapter / "reference.safetensors");
  const auto base_ref =
      ReadTensors(medq::test::ModelFixture("tiny-llama") / "reference.safetensors");
  for (const std::string p : {"prompt1", "prompt2"}) {
    INFO(p);
    const at::Tensor ids = ref.at("input_ids_" + p);
    CHECK(MaxAbsDiff(AllLogits(**adapted, ids), ref.at("logits_" + p)) <= 2e-3);
    CHECK(Greedy(**adapted, ToIds(ids), 24) == ToIds(ref.at("greedy_" + p)));
    // The base, loaded before and shared, still gives its own reference.
    CHECK(MaxAbsDiff(AllLogits(*base, base_ref.at("input_ids_" + p)), base_ref.at("logits_" + p)) <=
          2e-3);
    CHECK(Greedy(*base, ToIds(base_ref.at("input_ids_" + p)), 24) ==
          ToIds(base_ref.at("greedy_" + p)));
  }
  // Untargeted weights are shared, targeted ones are new tensors.
  const auto& bl = base->weights.layers[0];
  const auto& al = (*adapted)->weights.layers[0];
  // (q/k/v are stacked in one tensor, so an adapted q_proj copies k and v too.)
  CHECK(bl.gate_up_proj.data_ptr() == al.gate_up_proj.data_ptr());
  CHECK(bl.input_norm.data_ptr() == al.input_norm.data_ptr());
  CHECK(bl.qkv_proj.data_ptr() != al.qkv_proj.data_ptr());
  CHECK(bl.down_proj.data_ptr() != al.down_proj.data_ptr());
  CHECK(base->weights.embed.data_ptr() == (*adapted)->weights.embed.data_ptr());
}

TEST_CASE("an adapter merged into a packed bf16 base packs what it replaced", "[engine][lora]") {
  auto loaded = LoadModel(medq::test::ModelFixture("tiny-llama"), LoadOptions{"cpu", "bf16", true});
  REQUIRE(loaded.ok());
  const std::shared_ptr<const Model> base = *loaded;
  auto adapted = ApplyAdapter(base, kAdapter);
  REQUIRE(adapted.ok());
  const ModelWeights& b = base->weights;
  const ModelWeights& a = (*adapted)->weights;
  CHECK(a.lm_head_packed.is_same(b.lm_head_packed));
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerWeights& al = a.layers[i];
    const LayerWeights& bl = b.layers[i];
    for (const auto& [matrix, packed, base_matrix, base_packed] :
         {std::tuple{&al.qkv_proj, &al.qkv_packed, &bl.qkv_proj, &bl.qkv_packed},
          {&al.o_proj, &al.o_packed, &bl.o_proj, &bl.o_packed},
          {&al.gate_up_proj, &al.gate_up_packed, &bl.gate_up_proj, &bl.gate_up_packed},
          {&al.down_proj, &al.down_packed, &bl.down_proj, &bl.down_packed}}) {
      INFO("layer " << i << " matrix [" << matrix->size(0) << ", " << matrix->size(1) << "]");
      REQUIRE(packed->defined());
      if (matrix->is_same(*base_matrix)) {
        CHECK(packed->is_same(*base_packed));  // untouched: shared
        continue;
      }
      // Replaced by the merge: its own copy, packed from the merged matrix.
      CHECK_FALSE(packed->is_same(*base_packed));
      at::Tensor want = at::empty_like(*packed);
      kernels::PackBf16Tiles(reinterpret_cast<const uint16_t*>(matrix->data_ptr<at::BFloat16>()),
                             matrix->size(0), matrix->size(1),
                             reinterpret_cast<uint16_t*>(want.data_ptr<at::BFloat16>()));
      CHECK(at::equal(want, *packed));
    }
  }
  CHECK_FALSE(a.layers[0].qkv_packed.is_same(b.layers[0].qkv_packed));  // the adapter's
}

TEST_CASE("an adapter that does not fit its base is refused", "[engine][lora]") {
  // tiny-qwen2 has hidden 32, the adapter was trained for hidden 64.
  const auto qwen = MustLoad(medq::test::ModelFixture("tiny-qwen2"));
  auto r = ApplyAdapter(qwen, kAdapter);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("do not fit the base weight"));

  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"));
  TempDir tmp;
  fs::copy_file(kAdapter / "adapter_model.safetensors", tmp.path() / "adapter_model.safetensors");
  std::string config = ReadText(kAdapter / "adapter_config.json");
  const auto pos = config.find("\"q_proj\"");
  REQUIRE(pos != std::string::npos);
  WriteText(tmp.path() / "adapter_config.json", config.replace(pos, 8, "\"qkv_fused\""));
  r = ApplyAdapter(base, tmp.path());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("qkv_fused"));

  r = ApplyAdapter(base, tmp.path() / "missing");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kModelNotFound);
}

}  // namespace
}  // namespace medq::engine::test
