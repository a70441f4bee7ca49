// Log-probabilities from the continuous batch (SequenceStep::logprobs,
// engine.h's TokenLogprobs) against the transformers references of every
// fixture: the first token's against the log-softmax of the prompt's last
// logits row, every greedy step's top tokens and their differences against
// the reference top-8 logits. The device-loop leg runs the same cases on the
// device loop's tensors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "daemon/engine/batch.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// Runs `r` alone in a batch; every step's logprobs in order.
std::vector<SequenceStep> Steps(std::shared_ptr<const Model> model, const GenerateRequest& r) {
  Batch batch(std::move(model), BatchOptions{});
  REQUIRE(batch.Add(r).ok());
  std::vector<SequenceStep> out;
  while (!batch.empty()) {
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (SequenceStep& s : *steps)
      out.push_back(std::move(s));
  }
  return out;
}

TEST_CASE("logprobs equal the log-softmax of the reference logits", "[engine][batch][logprobs]") {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir, "fp32");
    GenerateRequest r;
    r.prompt = Ids(ref, "input_ids_prompt1");
    const std::vector<int32_t> greedy = Ids(ref, "greedy_prompt1");
    r.max_new_tokens = static_cast<int>(greedy.size());
    r.stop_ids = std::vector<int32_t>{};
    r.top_logprobs = 8;
    const std::vector<SequenceStep> steps = Steps(model, r);
    REQUIRE(steps.size() == greedy.size());
    const at::Tensor first = ref.at("logits_prompt1")[-1].to(at::kDouble).log_softmax(0);
    const at::Tensor top_ids = ref.at("greedy_prompt1_topk_ids").to(at::kLong);
    const at::Tensor top_logits = ref.at("greedy_prompt1_topk_logits").to(at::kDouble);
    for (size_t i = 0; i < steps.size(); ++i) {
      INFO("step " << i);
      const SequenceStep& s = steps[i];
      REQUIRE(s.logprobs.has_value());
      const TokenLogprobs& lp = *s.logprobs;
      CHECK(s.token == greedy[i]);
      REQUIRE(lp.top.size() == 8);
      // Greedy: the chosen token is the most likely one.
      CHECK(lp.top[0].first == s.token);
      CHECK(lp.top[0].second == lp.logprob);
      CHECK(lp.logprob <= 0);
      for (size_t j = 1; j < lp.top.size(); ++j)
        CHECK(lp.top[j].second <= lp.top[j - 1].second);
      // Each top token is among the reference's top 8, at the reference's
      // distance from the first (logits and log-probabilities differ by one
      // constant a row).
      const auto row_ids = top_ids[static_cast<int64_t>(i)];
      const auto row_logits = top_logits[static_cast<int64_t>(i)];
      std::map<int64_t, double> reference;
      for (int64_t j = 0; j < 8; ++j)
        reference[row_ids[j].item<int64_t>()] = row_logits[j].item<double>();
      for (const auto& [id, value] : lp.top) {
        INFO("token " << id);
        const auto it = reference.find(id);
        // A near tie at the edge of the top 8 may swap the last entries.
        if (it == reference.end()) {
          CHECK(&lp.top.back() ==
                &*std::find(lp.top.begin(), lp.top.end(), std::pair<int32_t, float>(id, value)));
          continue;
        }
        CHECK(std::abs((value - lp.logprob) - (it->second - reference.at(s.token))) < 1e-3);
      }
      if (i == 0) {
        for (const auto& [id, value] : lp.top)
          CHECK(std::abs(value - first[id].item<double>()) < 1e-3);
      }
    }
  }
}

TEST_CASE("logprobs: 0 alternatives gives the chosen token's alone, and none come unasked",
          "[engine][batch][logprobs]") {
  const auto dir = ModelFolders().front();
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir, "fp32");
  GenerateRequest r;
  r.prompt = Ids(ref, "input_ids_prompt2");
  r.max_new_tokens = 3;
  r.stop_ids = std::vector<int32_t>{};
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 3;
  r.top_logprobs = 0;
  for (const SequenceStep& s : Steps(model, r)) {
    REQUIRE(s.logprobs.has_value());
    CHECK(s.logprobs->top.empty());
    CHECK(s.logprobs->logprob <= 0);
  }
  r.top_logprobs = -1;
  for (const SequenceStep& s : Steps(model, r))
    CHECK_FALSE(s.logprobs.has_value());
  // Out of range, and through Generate, which does not give them.
  r.top_logprobs = kMaxTopLogprobs + 1;
  Batch batch(model, BatchOptions{});
  CHECK(batch.Add(r).error().code == ErrorCode::kInvalidRequest);
  r.top_logprobs = 2;
  auto generated = Generate(*model, r, [](int32_t) { return true; });
  REQUIRE_FALSE(generated.ok());
  CHECK(generated.error().code == ErrorCode::kInvalidRequest);
}

}  // namespace
}  // namespace medq::engine::test
