// The architectures without their own reference fixture, checked through the
// ones that have one: Mistral is Llama (plus an optional sliding window), Qwen3
// is Llama plus per-head q/k norms, linear RoPE scaling divides the frequencies.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

const fs::path kLlama = medq::test::ModelFixture("tiny-llama");

// tiny-llama's weights (plus `extra` tensors) under an edited config.json.
void WriteVariant(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit,
                  const std::map<std::string, at::Tensor>& extra = {}) {
  auto config = nlohmann::json::parse(ReadText(kLlama / "config.json"));
  edit(config);
  WriteText(dir / "config.json", config.dump());
  auto tensors = ReadTensors(kLlama / "model.safetensors");
  for (const auto& [k, v] : extra)
    tensors[k] = v;
  std::vector<StWriteTensor> out;
  for (const auto& [name, t] : tensors) {
    out.push_back({name, t.scalar_type() == at::kFloat ? StDtype::kF32 : StDtype::kBF16,
                   t.sizes().vec(), t.data_ptr(), t.nbytes()});
  }
  REQUIRE(WriteSafetensors(dir / "model.safetensors", out).ok());
}

// The logits of the last token decoded one step at a time equal recomputing
// the whole sequence.
void CheckCachedEqualsRecompute(const Model& m, const at::Tensor& ids) {
  c10::InferenceMode guard;
  KvCache cache(m, 1, ids.numel());
  const int64_t split = 3;
  Forward(m, ids.narrow(0, 0, split).view({1, -1}), cache, LogitsFor::kLastPosition);
  at::Tensor last;
  for (int64_t i = split; i < ids.numel(); ++i) {
    last = Forward(m, ids.narrow(0, i, 1).view({1, 1}), cache, LogitsFor::kLastPosition)[0][0];
  }
  CHECK(SameLogits(last, AllLogits(m, ids)[ids.numel() - 1]));
}

TEST_CASE("MistralForCausalLM computes what Llama computes", "[engine][arch]") {
  TempDir tmp;
  WriteVariant(tmp.path(), [](auto& c) {
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = nullptr;
  });
  const auto ref = ReadTensors(kLlama / "reference.safetensors");
  const auto m = MustLoad(tmp.path());
  CHECK(Info(*m).architecture == "MistralForCausalLM");
  CHECK(MaxAbsDiff(AllLogits(*m, ref.at("input_ids_prompt1")), ref.at("logits_prompt1")) <= 2e-3);
}

TEST_CASE("a Mistral sliding window cuts attention beyond the window", "[engine][arch]") {
  TempDir tmp;
  WriteVariant(tmp.path(), [](auto& c) {
    c["architectures"] = {"MistralForCausalLM"};
    c["sliding_window"] = 5;
  });
  const auto ref = ReadTensors(kLlama / "reference.safetensors");
  const auto m = MustLoad(tmp.path());
  const at::Tensor ids = ref.at("input_ids_prompt1");  // 12 ids
  const at::Tensor logits = AllLogits(*m, ids);
  const at::Tensor expected = ref.at("logits_prompt1");
  // Positions 0..4 see their whole past either way; later ones do not.
  CHECK(MaxAbsDiff(logits.narrow(0, 0, 5), expected.narrow(0, 0, 5)) <= 2e-3);
  CHECK(MaxAbsDiff(logits.narrow(0, 5, 7), expected.narrow(0, 5, 7)) > 1e-2);
  CheckCachedEqualsRecompute(*m, ids);
}

TEST_CASE("Qwen3ForCausalLM needs and applies per-head q/k norms", "[engine][arch]") {
  const auto to_qwen3 = [](auto& c) { c["architectures"] = {"Qwen3ForCausalLM"}; };
  TempDir missing;
  WriteVariant(missing.path(), to_qwen3);
  auto r = LoadModel(missing.path(), {});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("model.layers.0.self_attn.q_norm.weight"));

  std::map<std::string, at::Tensor> norms;
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    norms[p + "q_norm.weight"] = at::full({16}, 1.5).to(at::kBFloat16);
    norms[p + "k_norm.weight"] = at::full({16}, 0.5).to(at::kBFloat16);
  }
  TempDir tmp;
  WriteVariant(tmp.path(), to_qwen3, norms);
  const auto m = MustLoad(tmp.path());
  const auto ref = ReadTensors(kLlama / "reference.safetensors");
  const at::Tensor ids = ref.at("input_ids_prompt1");
  // The norms change the attention scores, so the Llama logits must move.
  CHECK(MaxAbsDiff(AllLogits(*m, ids), ref.at("logits_prompt1")) > 1e-2);
  CheckCachedEqualsRecompute(*m, ids);
}

TEST_CASE("linear rope scaling divides the inverse frequencies", "[engine][arch]") {
  TempDir tmp;
  WriteVariant(tmp.path(), [](auto& c) {
    c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  });
  const auto ref = ReadTensors(kLlama / "reference.safetensors");
  const auto m = MustLoad(tmp.path());
  CHECK(MaxAbsDiff(m->inv_freq * 4.0, ref.at("rope_inv_freq")) <= 1e-6);
}

TEST_CASE("bf16 weights on the CPU stay close to fp32", "[engine][arch]") {
  // The fixtures are bf16, so bf16-in-memory weights equal the fp32 ones
  // exactly; only the computation (float32 either way) could differ.
  const auto ref = ReadTensors(kLlama / "reference.safetensors");
  const auto m = MustLoad(kLlama, "bf16");
  CHECK(Info(*m).dtype == "bf16");
  CHECK(m->weights.layers[0].qkv_proj.scalar_type() == at::kBFloat16);
  CHECK(MaxAbsDiff(AllLogits(*m, ref.at("input_ids_prompt1")), ref.at("logits_prompt1")) <= 2e-3);
  CHECK(Greedy(*m, ToIds(ref.at("input_ids_prompt1")), 24) == ToIds(ref.at("greedy_prompt1")));
}

}  // namespace
}  // namespace medq::engine::test
