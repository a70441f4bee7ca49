// Continuous batching (batch.h): a sequence decoded beside others gives what
// it gives alone. On the CPU's raw-buffer path that is bitwise (tokens and
// logits); on the generic LibTorch path the tokens match. Also chunked
// prefill and its budget, seeded sampling on both token loops, leaving the
// batch (stop, length, Remove), validation and a failing step.
#include <catch2/catch.hpp>

#include <map>
#include <optional>

#include "daemon/engine/batch.h"
#include "daemon/engine/batch_testing.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/fault_injection.h"
#include "daemon/engine/generate.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// Records every logits row the batch samples from, per sequence, while alive.
class LogitsLog {
 public:
  LogitsLog() {
    SetBatchLogitsObserver([this](SequenceId id, const at::Tensor& row) {
      rows[id].push_back(row.to(at::kCPU).clone());
    });
  }
  ~LogitsLog() { SetBatchLogitsObserver({}); }
  LogitsLog(const LogitsLog&) = delete;
  LogitsLog& operator=(const LogitsLog&) = delete;
  std::map<SequenceId, std::vector<at::Tensor>> rows;
};

// Greedy decoding of one sequence as Generate runs it (Forward over the whole
// prompt, then one Forward per token): the logits of every token.
std::vector<at::Tensor> SoloLogits(const Model& m, const std::vector<int32_t>& prompt, int n) {
  c10::InferenceMode guard;
  KvCache cache(m, 1, static_cast<int64_t>(prompt.size()) + n);
  const std::vector<int64_t> ids(prompt.begin(), prompt.end());
  at::Tensor logits =
      Forward(m, at::tensor(ids, at::kLong).view({1, -1}), cache, LogitsFor::kLastPosition);
  std::vector<at::Tensor> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(logits.view({-1}).clone());
    if (i + 1 < n) {
      const int64_t next = logits.view({-1}).argmax().item<int64_t>();
      logits =
          Forward(m, at::tensor({next}, at::kLong).view({1, 1}), cache, LogitsFor::kLastPosition);
    }
  }
  return out;
}

// Whether the batch's steps take the raw-buffer path (they run in inference
// mode, which the check needs).
bool FastPathApplies(const Model& m) {
  c10::InferenceMode guard;
  return CpuDecodeRowsApply(m);
}

TEST_CASE("batched CPU decoding is bitwise a solo run: tokens and logits", "[engine][batch]") {
  // The host loop's raw-buffer path, also in the device-loop leg.
  const ScopedSwitch host_loop(&SetDeviceLoopOnCpu, false, DeviceLoopForced());
  for (const auto& dir : ModelFolders()) {
    // bf16 twice: row-major, and with the packed copy that a daemon with
    // max_concurrent > 1 loads (LoadOptions::pack_for_batches).
    for (const auto& [dtype, packed] :
         {std::pair<std::string, bool>{"fp32", false}, {"bf16", false}, {"bf16", true}}) {
      INFO("model " << dir.filename().string() << " " << dtype << (packed ? " packed" : ""));
      const auto ref = ReadTensors(dir / "reference.safetensors");
      auto loaded = LoadModel(dir, LoadOptions{"cpu", dtype, packed});
      REQUIRE(loaded.ok());
      const std::shared_ptr<const Model> model = *loaded;
      REQUIRE(model->weights.lm_head_packed.defined() == packed);
      REQUIRE(FastPathApplies(*model));
      const std::vector<Joining> requests = MixedRequests(ref);
      LogitsLog log;
      const std::vector<Outcome> out = RunBatch(model, BatchOptions{}, requests);
      for (size_t i = 0; i < requests.size(); ++i) {
        INFO("sequence " << i);
        const GenerateRequest& r = requests[i].request;
        REQUIRE(out[i].result.has_value());
        CHECK(out[i].result->finish == FinishReason::kLength);
        CHECK(out[i].result->new_tokens == r.max_new_tokens);
        CHECK(out[i].tokens == Greedy(*model, r.prompt, r.max_new_tokens));
        const std::vector<at::Tensor> solo = SoloLogits(*model, r.prompt, r.max_new_tokens);
        const std::vector<at::Tensor>& batched = log.rows.at(out[i].id);
        REQUIRE(batched.size() == solo.size());
        for (size_t t = 0; t < solo.size(); ++t) {
          INFO("token " << t);
          CHECK(at::equal(batched[t], solo[t]));
        }
      }
      if (dtype == "fp32") {
        CHECK(out[0].tokens == Ids(ref, "greedy_prompt1"));
        CHECK(out[1].tokens == Ids(ref, "greedy_prompt2"));
      }
    }
  }
}

TEST_CASE("a packed bf16 model decodes as the row-major one to float32 rounding",
          "[engine][batch]") {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    auto packed = LoadModel(dir, LoadOptions{"cpu", "bf16", true});
    REQUIRE(packed.ok());
    const auto row_major = MustLoad(dir, "bf16");
    // The copy is counted: the packed model holds more bytes.
    CHECK(Info(**packed).parameter_bytes > Info(*row_major).parameter_bytes);
    const std::vector<int32_t> prompt = Ids(ref, "input_ids_prompt1");
    const std::vector<at::Tensor> a = SoloLogits(**packed, prompt, 8);
    const std::vector<at::Tensor> b = SoloLogits(*row_major, prompt, 8);
    // The same prefill, then decode steps whose dot products are summed in
    // another order: each row within float32 rounding, compared while the
    // two pick the same token (afterwards they would decode different text).
    size_t compared = 0;
    for (size_t t = 0; t < a.size(); ++t) {
      INFO("token " << t);
      const double scale = b[t].abs().max().item<double>();
      const double diff = (a[t] - b[t]).abs().max().item<double>();
      CHECK(diff <= 1e-4 * scale);
      ++compared;
      if (a[t].argmax().item<int64_t>() != b[t].argmax().item<int64_t>()) break;
    }
    CHECK(compared >= 2);
  }
}

TEST_CASE("batched generic-path decoding gives the reference and solo tokens", "[engine][batch]") {
  const ScopedSwitch generic(&SetCpuDecodeStepEnabled, false, true);
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir, "fp32");
    REQUIRE_FALSE(FastPathApplies(*model));
    const std::vector<Joining> requests = MixedRequests(ref);
    const std::vector<Outcome> out = RunBatch(model, BatchOptions{}, requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      INFO("sequence " << i);
      const GenerateRequest& r = requests[i].request;
      CHECK(out[i].tokens == Greedy(*model, r.prompt, r.max_new_tokens));
    }
    CHECK(out[0].tokens == Ids(ref, "greedy_prompt1"));
    CHECK(out[1].tokens == Ids(ref, "greedy_prompt2"));
  }
}

TEST_CASE("seeded sampling gives the same tokens batched and alone, on both token loops",
          "[engine][batch]") {
  const auto dir = ModelFolders().front();
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir, "fp32");
  for (const bool device_loop : {false, true}) {
    INFO("device loop " << device_loop);
    const ScopedSwitch loop(&SetDeviceLoopOnCpu, device_loop, DeviceLoopForced());
    const std::vector<Joining> requests = SeededMixedRequests(ref);
    CheckEachAsAlone(*model, requests, RunBatch(model, BatchOptions{}, requests));
  }
}

TEST_CASE("a chunked prefill gives the reference ids", "[engine][batch]") {
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir, "fp32");
    for (const bool generic : {false, true}) {
      INFO("generic path " << generic);
      const ScopedSwitch path(&SetCpuDecodeStepEnabled, !generic, true);
      BatchOptions options;
      options.prefill_chunk_tokens = 3;
      const auto out = RunBatch(model, options,
                                {{0, Request(Ids(ref, "input_ids_prompt1"), 24)},
                                 {0, Request(Ids(ref, "input_ids_prompt2"), 24)}});
      CHECK(out[0].tokens == Ids(ref, "greedy_prompt1"));
      CHECK(out[1].tokens == Ids(ref, "greedy_prompt2"));
    }
  }
}

TEST_CASE("the prefill budget: decoding goes on while a long prompt is read", "[engine][batch]") {
  const auto dir = ModelFolders().front();
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir, "fp32");
  const std::vector<int32_t> p1 = Ids(ref, "input_ids_prompt1");
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 5; ++i)
    long_prompt.insert(long_prompt.end(), p1.begin(), p1.end());  // 5 x prompt1
  BatchOptions options;
  options.prefill_chunk_tokens = 4;
  options.prefill_budget_tokens = 4;
  Batch batch(model, options);
  const SequenceId short_id = *batch.Add(Request(p1, 40));
  REQUIRE(batch.Step().ok());  // prompt1 in 3 chunks
  REQUIRE(batch.Step().ok());
  auto first = batch.Step();
  REQUIRE(first.ok());
  REQUIRE(first->size() == 1);
  CHECK(batch.decoding() == 1);
  const SequenceId long_id = *batch.Add(Request(long_prompt, 4));
  const int64_t chunks = (static_cast<int64_t>(long_prompt.size()) + 3) / 4;
  for (int64_t step = 1; step <= chunks; ++step) {
    INFO("step " << step);
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    // The decoding sequence gets a token every step; the long prompt yields
    // its first token with its last chunk only.
    const bool long_done = step == chunks;
    REQUIRE(steps->size() == (long_done ? 2u : 1u));
    CHECK((*steps)[0].id == short_id);
    if (long_done) CHECK((*steps)[1].id == long_id);
  }
  CHECK(batch.decoding() == 2);
}

TEST_CASE("the prefill budget admits further chunks only while they fit", "[engine][batch]") {
  const auto dir = ModelFolders().front();
  const auto ref = ReadTensors(dir / "reference.safetensors");
  const auto model = MustLoad(dir, "fp32");
  const std::vector<int32_t> p1 = Ids(ref, "input_ids_prompt1");
  const std::vector<int32_t> eight(p1.begin(), p1.begin() + 8);
  // Step at which each of two 8-token prompts (chunks of 4) gets its token.
  const auto first_token_steps = [&](int budget) {
    BatchOptions options;
    options.prefill_chunk_tokens = 4;
    options.prefill_budget_tokens = budget;
    Batch batch(model, options);
    const SequenceId a = *batch.Add(Request(eight, 2));
    const SequenceId b = *batch.Add(Request(eight, 2));
    std::map<SequenceId, int> first;
    for (int step = 1; step <= 6; ++step) {
      auto steps = batch.Step();
      REQUIRE(steps.ok());
      for (const SequenceStep& s : *steps)
        first.emplace(s.id, step);
    }
    return std::pair<int, int>(first.at(a), first.at(b));
  };
  using Steps = std::pair<int, int>;
  CHECK(first_token_steps(8) == Steps(2, 2));  // both chunks fit every step
  CHECK(first_token_steps(6) == Steps(2, 4));  // one chunk per step
  CHECK(first_token_steps(1) == Steps(2, 4));  // the first chunk always runs
}

}  // namespace
}  // namespace medq::engine::test
