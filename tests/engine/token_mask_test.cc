// A TokenConstraint (structured output) in the engine: the host loop, the
// device loop (run on the CPU, as CI runs the GPU's branch) and the batch
// produce only allowed tokens, tell the constraint each one, and mask the
// same way; a sequence's constraint does not touch its neighbours.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include "daemon/engine/token_mask.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// Allows a fixed set of ids (all of them when `open`) and records what it
// was told.
class SetConstraint : public TokenConstraint {
 public:
  explicit SetConstraint(std::set<int32_t> allowed) : allowed_(std::move(allowed)) {}
  void FillAllowed(std::vector<int32_t>& words) override {
    ++fills;
    for (const int32_t id : allowed_) {
      words[static_cast<size_t>(id / 32)] |= static_cast<int32_t>(1u << (id % 32));
    }
  }
  void Accept(int32_t id) override { accepted.push_back(id); }

  int fills = 0;
  std::vector<int32_t> accepted;

 private:
  std::set<int32_t> allowed_;
};

}  // namespace

TEST_CASE("MaskLogits keeps the allowed ids on both loops", "[engine][token_mask]") {
  const int64_t vocab = 100;  // not a multiple of 32
  const at::Tensor logits = at::randn({vocab});
  for (const bool on_device : {false, true}) {
    INFO("device loop " << on_device);
    SetConstraint c({0, 31, 32, 63, 99});
    std::vector<int32_t> words;
    const at::Tensor masked = MaskLogits(logits, c, words, on_device);
    REQUIRE(masked.sizes() == logits.sizes());
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = masked[i].item<float>();
      if (i == 0 || i == 31 || i == 32 || i == 63 || i == 99) {
        CHECK(v == logits[i].item<float>());
      } else {
        CHECK(v == -std::numeric_limits<float>::infinity());
      }
    }
  }
}

TEST_CASE("generation under a constraint draws only allowed tokens", "[engine][token_mask]") {
  const auto dirs = ModelFolders();
  REQUIRE(!dirs.empty());
  auto loaded = LoadModel(dirs.front(), LoadOptions{"cpu", "fp32"});
  REQUIRE(loaded.ok());
  const std::shared_ptr<const Model> model = *loaded;
  const std::set<int32_t> allowed = {3, 17, 42, 77};
  for (const bool device_loop : {false, true}) {
    INFO("device loop " << device_loop);
    const ScopedSwitch loop(&SetDeviceLoopOnCpu, device_loop, DeviceLoopForced());
    for (const float temperature : {0.0f, 1.0f}) {
      GenerateRequest r = Request({1, 2, 3, 4, 5}, 12);
      r.sampling.temperature = temperature;
      r.sampling.seed = 7;
      auto c = std::make_shared<SetConstraint>(allowed);
      r.constraint = c;
      const std::vector<int32_t> out = Generated(*model, r);
      REQUIRE(out.size() == 12);
      for (const int32_t id : out)
        CHECK(allowed.count(id) == 1);
      CHECK(c->accepted == out);
      CHECK(c->fills == 12);
    }
  }

  // In a batch: a constrained sequence beside unconstrained ones, which run
  // as they do alone: two greedy ones (which the device loop chooses
  // together, by one argmax), a greedy one with a repetition penalty and a
  // seeded sampled one (chosen one at a time).
  for (const bool device_loop : {false, true}) {
    INFO("batch, device loop " << device_loop);
    const ScopedSwitch loop(&SetDeviceLoopOnCpu, device_loop, DeviceLoopForced());
    GenerateRequest free_run = Request({9, 8, 7}, 10);
    GenerateRequest held = Request({1, 2, 3, 4, 5}, 10);
    auto c = std::make_shared<SetConstraint>(allowed);
    held.constraint = c;
    GenerateRequest other_free = Request({4, 4, 2, 8}, 12);
    GenerateRequest penalized = Request({7, 7, 3, 7}, 10);
    penalized.sampling.repetition_penalty = 1.5f;
    GenerateRequest sampled = Request({5, 6}, 9);
    sampled.sampling.temperature = 0.9f;
    sampled.sampling.seed = 11;
    const auto out =
        RunBatch(model, BatchOptions{},
                 {{0, free_run}, {1, held}, {0, other_free}, {2, penalized}, {0, sampled}});
    CHECK(out[0].tokens == Generated(*model, free_run));
    REQUIRE(out[1].tokens.size() == 10);
    for (const int32_t id : out[1].tokens)
      CHECK(allowed.count(id) == 1);
    CHECK(c->accepted == out[1].tokens);
    CHECK(out[2].tokens == Generated(*model, other_free));
    CHECK(out[3].tokens == Generated(*model, penalized));
    CHECK(out[4].tokens == Generated(*model, sampled));
  }
}

}  // namespace medq::engine::test
