// Every fixture model against the transformers reference outputs (CPU, fp32).
#include <catch2/catch.hpp>

#include "daemon/engine/rope.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

constexpr double kLogitTol = 2e-3;

TEST_CASE("fixture models match transformers: prompt logits, greedy ids, rope",
          "[engine][reference]") {
  const auto folders = ModelFolders();
  REQUIRE(folders.size() >= 4);
  for (const auto& dir : folders) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir);
    CHECK(MaxAbsDiff(model->inv_freq, ref.at("rope_inv_freq")) <=
          1e-6 * ref.at("rope_inv_freq").abs().max().item<double>() + 1e-12);
    for (const std::string p : {"prompt1", "prompt2"}) {
      INFO(p);
      const at::Tensor ids = ref.at("input_ids_" + p);
      const at::Tensor logits = AllLogits(*model, ids);
      REQUIRE(logits.sizes() == ref.at("logits_" + p).sizes());
      CHECK(MaxAbsDiff(logits, ref.at("logits_" + p)) <= kLogitTol);
      CHECK(Greedy(*model, ToIds(ids), 24) == ToIds(ref.at("greedy_" + p)));
    }
  }
}

// Decoding one token at a time with the cache gives the reference top-8 logits
// at every step, and the same logits as recomputing the whole sequence.
TEST_CASE("cached decoding equals the reference steps and a full recompute",
          "[engine][reference]") {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir);
    c10::InferenceMode guard;
    for (const std::string p : {"prompt1", "prompt2"}) {
      INFO(p);
      const at::Tensor prompt = ref.at("input_ids_" + p).to(at::kLong);
      const at::Tensor greedy = ref.at("greedy_" + p).to(at::kLong);
      const at::Tensor top_ids = ref.at("greedy_" + p + "_topk_ids").to(at::kLong);
      const at::Tensor top_logits = ref.at("greedy_" + p + "_topk_logits");
      const int64_t steps = greedy.size(0);
      KvCache cache(*model, 1, prompt.numel() + steps);
      at::Tensor step =
          Forward(*model, prompt.view({1, -1}), cache, LogitsFor::kLastPosition)[0][0];
      for (int64_t i = 0; i < steps; ++i) {
        INFO("step " << i);
        CHECK(MaxAbsDiff(step.index_select(0, top_ids[i]), top_logits[i]) <= kLogitTol);
        CHECK(step.argmax().item<int64_t>() == greedy[i].item<int64_t>());
        if (i + 1 < steps) {
          step = Forward(*model, greedy[i].view({1, 1}), cache, LogitsFor::kLastPosition)[0][0];
        }
      }
      // The last cached step against recomputing prompt + all but the last token.
      const at::Tensor full = at::cat({prompt, greedy.narrow(0, 0, steps - 1)});
      const at::Tensor recomputed = AllLogits(*model, full)[full.numel() - 1];
      CHECK(SameLogits(step, recomputed));
    }
  }
}

// The right-padded batch: valid positions of row r equal the single-sequence
// reference of prompt r+1.
TEST_CASE("a padded batch gives each row's single-sequence logits", "[engine][reference]") {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir);
    c10::InferenceMode guard;
    const at::Tensor ids = ref.at("batch_input_ids").to(at::kLong);
    const at::Tensor mask = ref.at("batch_attention_mask").to(at::kLong);
    KvCache cache(*model, ids.size(0), ids.size(1));
    const at::Tensor logits = Forward(*model, ids, cache, LogitsFor::kAllPositions);
    for (int64_t r = 0; r < ids.size(0); ++r) {
      const int64_t len = mask[r].sum().item<int64_t>();
      const at::Tensor expected = ref.at("logits_prompt" + std::to_string(r + 1));
      REQUIRE(expected.size(0) == len);
      CHECK(MaxAbsDiff(logits[r].narrow(0, 0, len), expected) <= kLogitTol);
    }
  }
}

TEST_CASE("llama3 rope scaling holds on a 1500-token prompt", "[engine][reference]") {
  const auto dir = medq::test::ModelFixture("tiny-llama3");
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir);
  const at::Tensor ids = ref.at("input_ids_long");
  REQUIRE(ids.numel() == 1500);
  {
    // Only the last position: all 1500 x 128256 logits would take 770 MB.
    c10::InferenceMode guard;
    KvCache cache(*model, 1, ids.numel());
    const at::Tensor last =
        Forward(*model, ids.to(at::kLong).view({1, -1}), cache, LogitsFor::kLastPosition)
            .view({-1});
    CHECK(MaxAbsDiff(last, ref.at("logits_long_last").view({-1})) <= kLogitTol);
  }
  for (const auto& [name, t] : ref) {
    if (name.rfind("greedy_long", 0) == 0 && t.dim() == 1 && t.scalar_type() == at::kLong) {
      INFO(name);
      CHECK(Greedy(*model, ToIds(ids), static_cast<int>(t.numel())) == ToIds(t));
    }
  }
}

}  // namespace
}  // namespace medq::engine::test
