// Sampling and the generation loop's stop rules, on tiny-llama.
#include <catch2/catch.hpp>

#include <cmath>

#include "daemon/engine/generate.h"
#include "daemon/engine/sampling.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

struct Run {
  std::vector<int32_t> ids;
  GenerateResult result;
};

Run RunRequest(const Model& m, const GenerateRequest& r, int cancel_after = -1) {
  Run run;
  auto res = Generate(m, r, [&](int32_t id) {
    run.ids.push_back(id);
    return cancel_after < 0 || static_cast<int>(run.ids.size()) < cancel_after;
  });
  REQUIRE(res.ok());
  run.result = *res;
  return run;
}

GenerateRequest ReferenceRequest(const Model& m, float temperature, std::optional<uint64_t> seed) {
  GenerateRequest r;
  r.prompt = {1, 6989, 9503, 21829, 2063};
  r.max_new_tokens = 16;
  r.stop_ids = std::vector<int32_t>{};
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

TEST_CASE("the same seed gives the same tokens, another seed other tokens", "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama"));
  auto r = ReferenceRequest(*m, 1.5f, 42);
  const Run a = RunRequest(*m, r);
  const Run b = RunRequest(*m, r);
  CHECK(a.ids == b.ids);
  CHECK(a.ids.size() == 16);
  r.sampling.seed = 43;
  CHECK(RunRequest(*m, r).ids != a.ids);
}

TEST_CASE("top_k = 1 sampling equals greedy", "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama"));
  const Run greedy = RunRequest(*m, ReferenceRequest(*m, 0, std::nullopt));
  auto r = ReferenceRequest(*m, 5.0f, 7);
  r.sampling.top_k = 1;
  CHECK(RunRequest(*m, r).ids == greedy.ids);
}

TEST_CASE("greedy choice is at::argmax: first of equal maxima, first NaN, any length",
          "[engine][sampling]") {
  SamplingParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);
  at::manual_seed(7);
  for (const int64_t n : {1, 3, 4, 5, 49152, 151936}) {
    at::Tensor row = at::randn({n});
    CHECK(sampler.Next(row, {}) == row.argmax().item<int64_t>());
    // Ties: the first of the largest wins.
    row[n - 1] = 1e9f;
    row[n / 2] = 1e9f;
    CHECK(sampler.Next(row, {}) == row.argmax().item<int64_t>());
    // A NaN ranks above every number, as LibTorch has it.
    row[n - 1] = NAN;
    CHECK(sampler.Next(row, {}) == row.argmax().item<int64_t>());
    row[0] = NAN;
    CHECK(sampler.Next(row, {}) == 0);
    // Rows that are not a contiguous float32 vector go to LibTorch.
    const at::Tensor strided = at::randn({n, 2}).select(1, 1);
    CHECK(sampler.Next(strided, {}) == strided.argmax().item<int64_t>());
  }
}

TEST_CASE("warpers keep what transformers keeps", "[engine][sampling]") {
  const at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, 0.0f, -1.0f});
  const auto kept = [&](SamplingParams p) {
    const at::Tensor w = Sampler(p).Warp(logits, {});
    std::vector<int> out;
    for (int i = 0; i < w.numel(); ++i) {
      if (std::isfinite(w[i].item<float>())) out.push_back(i);
    }
    return out;
  };
  SamplingParams p;
  p.temperature = 1;
  p.top_k = 2;
  CHECK(kept(p) == std::vector<int>{1, 2});
  p.top_k = 0;
  p.top_p = 0.8f;  // probs ~ .23 .63 .23(2) ...: 0.63 + 0.23 covers 0.8
  CHECK(kept(p) == std::vector<int>{1, 2});
  p.top_p = 1;
  p.min_p = 0.3f;  // keeps probs >= 0.3 * p(1): e^-1 = 0.37 ok, e^-2 = 0.135 not
  CHECK(kept(p) == std::vector<int>{1, 2});
  // Repetition penalty divides positive and multiplies negative scores.
  SamplingParams rep;
  rep.repetition_penalty = 2;
  const at::Tensor w = Sampler(rep).Warp(logits, {1, 4});
  CHECK(w[1].item<float>() == Approx(1.5f));
  CHECK(w[4].item<float>() == Approx(-2.0f));
  CHECK(w[0].item<float>() == Approx(1.0f));
}

TEST_CASE("the device sampler chooses what the host sampler chooses for one seed",
          "[engine][sampling]") {
  SamplingParams variants[6];
  variants[0].temperature = 0;  // greedy
  variants[1].temperature = 0.8f;
  variants[2].temperature = 1.3f;
  variants[2].top_k = 40;
  variants[3].temperature = 1.0f;
  variants[3].top_p = 0.9f;
  variants[4].temperature = 0.7f;
  variants[4].min_p = 0.05f;
  variants[5].temperature = 1.1f;
  variants[5].repetition_penalty = 1.3f;
  variants[5].top_k = 20;
  for (SamplingParams p : variants) {
    p.seed = 1234;
    CAPTURE(p.temperature, p.top_k, p.top_p, p.min_p, p.repetition_penalty);
    Sampler host(p), device(p);
    std::vector<int32_t> history = {3, 17, 17, 250};
    device.StartOnDevice(history, 512, at::kCPU);
    at::manual_seed(99);
    for (int step = 0; step < 200; ++step) {
      // Peaked logits, so that the penalty and the warpers change the choice.
      const at::Tensor logits = at::randn({512}) * 4;
      const int32_t want = host.Next(logits, history);
      const at::Tensor got = device.NextOnDevice(logits);
      REQUIRE(got.dim() == 0);
      REQUIRE(got.item<int64_t>() == want);
      device.Observe(got);
      history.push_back(want);
    }
  }
}

// Runs the loop a GPU takes (sampling and feedback on the model's device)
// on the CPU for its scope.
class DeviceLoop : public ScopedSwitch {
 public:
  DeviceLoop() : ScopedSwitch(&SetDeviceLoopOnCpu, true, DeviceLoopForced()) {}
};

TEST_CASE("the device loop generates what the host loop generates", "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama"));
  auto greedy = ReferenceRequest(*m, 0, std::nullopt);
  auto sampled = ReferenceRequest(*m, 1.2f, 5);
  sampled.sampling.top_p = 0.95f;
  sampled.sampling.repetition_penalty = 1.2f;
  for (const GenerateRequest& r : {greedy, sampled}) {
    const Run host = RunRequest(*m, r);
    DeviceLoop on;
    const Run device = RunRequest(*m, r);
    CHECK(device.ids == host.ids);
    CHECK(device.result.new_tokens == 16);
  }
}

TEST_CASE("generation stops on a stop id, on max_new_tokens and on cancellation",
          "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama"));
  const Run full = RunRequest(*m, ReferenceRequest(*m, 0, std::nullopt));
  REQUIRE(full.ids.size() == 16);
  CHECK(full.result.finish == FinishReason::kLength);
  CHECK(full.result.new_tokens == 16);
  CHECK(full.result.prompt_tokens == 5);

  auto r = ReferenceRequest(*m, 0, std::nullopt);
  r.stop_ids = std::vector<int32_t>{full.ids[5]};
  const Run stopped = RunRequest(*m, r);
  const auto first = std::find(full.ids.begin(), full.ids.end(), full.ids[5]);
  CHECK(stopped.ids == std::vector<int32_t>(full.ids.begin(), first + 1));
  CHECK(stopped.result.finish == FinishReason::kStop);

  const Run cancelled = RunRequest(*m, ReferenceRequest(*m, 0, std::nullopt), 3);
  CHECK(cancelled.ids == std::vector<int32_t>(full.ids.begin(), full.ids.begin() + 3));
  CHECK(cancelled.result.finish == FinishReason::kCancelled);

  r = ReferenceRequest(*m, 0, std::nullopt);
  r.max_new_tokens = 0;
  const Run none = RunRequest(*m, r);
  CHECK(none.ids.empty());
  CHECK(none.result.finish == FinishReason::kLength);
}

TEST_CASE("the model's eos ids stop generation by default", "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama3"));
  CHECK(Info(*m).eos_ids == std::vector<int32_t>{128001, 128008, 128009});
  CHECK(Info(*m).bos_id == 128000);
  const auto q = MustLoad(medq::test::ModelFixture("tiny-qwen2"));
  CHECK(Info(*q).eos_ids == std::vector<int32_t>{151645});
}

TEST_CASE("bad requests are refused with kInvalidRequest", "[engine][sampling]") {
  const auto m = MustLoad(medq::test::ModelFixture("tiny-llama"));
  const auto refused = [&](const GenerateRequest& r, const std::string& needle) {
    auto res = Generate(*m, r, [](int32_t) { return true; });
    REQUIRE_FALSE(res.ok());
    CHECK(res.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(res.error().message, Catch::Contains(needle));
  };
  auto r = ReferenceRequest(*m, 0, std::nullopt);
  r.prompt.clear();
  refused(r, "empty");
  r = ReferenceRequest(*m, 0, std::nullopt);
  r.prompt.push_back(32000);
  refused(r, "outside the vocabulary");
  r = ReferenceRequest(*m, 0, std::nullopt);
  r.max_new_tokens = 5000;
  refused(r, "exceeds the model's context");
  r = ReferenceRequest(*m, 1, std::nullopt);
  r.sampling.top_p = 0;
  refused(r, "top_p");
}

}  // namespace
}  // namespace medq::engine::test
