// Sequences leaving the batch (stop id, max_new_tokens, Remove), requests it
// refuses, and a step that fails (batch.h).
#include <catch2/catch.hpp>

#include "daemon/engine/batch.h"
#include "daemon/engine/fault_injection.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

struct Fixture {
  Fixture()
      : dir(ModelFolders().front()),
        ref(ReadTensors(dir / "reference.safetensors")),
        model(MustLoad(dir, "fp32")),
        p1(ToIds(ref.at("input_ids_prompt1"))),
        p2(ToIds(ref.at("input_ids_prompt2"))),
        greedy1(ToIds(ref.at("greedy_prompt1"))),
        greedy2(ToIds(ref.at("greedy_prompt2"))) {}
  fs::path dir;
  std::map<std::string, at::Tensor> ref;
  std::shared_ptr<const Model> model;
  std::vector<int32_t> p1, p2, greedy1, greedy2;
};

// Steps until the batch is empty; the tokens of each id and its last step.
std::map<SequenceId, std::vector<int32_t>> Drain(Batch& batch,
                                                 std::map<SequenceId, SequenceStep>* last) {
  std::map<SequenceId, std::vector<int32_t>> tokens;
  while (!batch.empty()) {
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (const SequenceStep& s : *steps) {
      if (s.has_token) tokens[s.id].push_back(s.token);
      (*last)[s.id] = s;
    }
  }
  return tokens;
}

TEST_CASE("a batch sequence ends on max_new_tokens and on a stop id", "[engine][batch]") {
  const Fixture f;
  Batch batch(f.model, BatchOptions{});
  const SequenceId length_id = *batch.Add(Request(f.p1, 5));
  GenerateRequest stopping = Request(f.p2, 24);
  stopping.stop_ids = std::vector<int32_t>{f.greedy2[3]};
  const SequenceId stop_id = *batch.Add(stopping);
  CHECK(batch.size() == 2);
  std::map<SequenceId, SequenceStep> last;
  auto tokens = Drain(batch, &last);

  CHECK(tokens[length_id] == std::vector<int32_t>(f.greedy1.begin(), f.greedy1.begin() + 5));
  REQUIRE(last[length_id].finished);
  CHECK(last[length_id].result.finish == FinishReason::kLength);
  CHECK(last[length_id].result.new_tokens == 5);
  CHECK(last[length_id].result.prompt_tokens == static_cast<int>(f.p1.size()));
  CHECK(last[length_id].result.prefill_ms > 0);
  CHECK(last[length_id].result.decode_ms > 0);

  const auto first_stop =
      std::find(f.greedy2.begin(), f.greedy2.end(), f.greedy2[3]) - f.greedy2.begin() + 1;
  CHECK(tokens[stop_id] == std::vector<int32_t>(f.greedy2.begin(), f.greedy2.begin() + first_stop));
  REQUIRE(last[stop_id].finished);
  CHECK(last[stop_id].token == f.greedy2[3]);
  CHECK(last[stop_id].result.finish == FinishReason::kStop);
  CHECK(last[stop_id].result.new_tokens == first_stop);
  CHECK(batch.decoding() == 0);
}

TEST_CASE("Remove mid-batch leaves the other sequences unchanged", "[engine][batch]") {
  const Fixture f;
  Batch batch(f.model, BatchOptions{});
  const SequenceId a = *batch.Add(Request(f.p1, 24));
  const SequenceId b = *batch.Add(Request(f.p2, 24));
  const SequenceId c = *batch.Add(Request(f.p1, 24));
  std::map<SequenceId, std::vector<int32_t>> tokens;
  for (int i = 0; i < 6; ++i) {
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (const SequenceStep& s : *steps)
      tokens[s.id].push_back(s.token);
  }
  const GenerateResult removed = batch.Remove(b);
  CHECK(removed.finish == FinishReason::kCancelled);
  CHECK(removed.new_tokens == 6);
  CHECK(removed.prompt_tokens == static_cast<int>(f.p2.size()));
  CHECK(batch.size() == 2);
  CHECK(batch.Remove(b).new_tokens == 0);  // unknown now: a default result
  std::map<SequenceId, SequenceStep> last;
  for (const auto& [id, more] : Drain(batch, &last))
    tokens[id].insert(tokens[id].end(), more.begin(), more.end());
  CHECK(tokens[a] == f.greedy1);
  CHECK(tokens[c] == f.greedy1);
  CHECK(tokens[b] == std::vector<int32_t>(f.greedy2.begin(), f.greedy2.begin() + 6));
  CHECK(last.count(b) == 0);
}

TEST_CASE("Add refuses what Generate refuses, and max_new_tokens 0", "[engine][batch]") {
  const Fixture f;
  Batch batch(f.model, BatchOptions{});
  const auto refused = [&](const GenerateRequest& r, const std::string& words) {
    auto id = batch.Add(r);
    REQUIRE_FALSE(id.ok());
    CHECK(id.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(id.error().message, Catch::Contains(words));
  };
  refused(Request({}, 4), "empty");
  refused(Request({static_cast<int32_t>(f.model->config.vocab_size)}, 4), "vocabulary");
  refused(Request(f.p1, 0), "max_new_tokens");
  refused(Request(f.p1, -1), "max_new_tokens");
  refused(Request(f.p1, static_cast<int>(f.model->info.max_context)), "context");
  GenerateRequest bad_sampling = Request(f.p1, 4);
  bad_sampling.sampling.top_p = 0;
  refused(bad_sampling, "top_p");
  CHECK(batch.empty());
  CHECK(batch.Step()->empty());
}

TEST_CASE("a failing step empties the batch and reports GPU_OOM", "[engine][batch]") {
  const Fixture f;
  Batch batch(f.model, BatchOptions{});
  REQUIRE(batch.Add(Request(f.p1, 8)).ok());
  REQUIRE(batch.Step().ok());  // prompt read, first token
  REQUIRE(batch.Add(Request(f.p2, 8)).ok());
  ArmFault(Fault::kDecodeOom);
  auto failed = batch.Step();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().code == ErrorCode::kGpuOom);
  CHECK(batch.empty());
  // The batch is usable afterwards.
  const SequenceId again = *batch.Add(Request(f.p1, 3));
  std::map<SequenceId, SequenceStep> last;
  CHECK(Drain(batch, &last)[again] ==
        std::vector<int32_t>(f.greedy1.begin(), f.greedy1.begin() + 3));
}

}  // namespace
}  // namespace medq::engine::test
