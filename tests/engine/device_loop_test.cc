// The loop a GPU takes, run on the CPU (SetDeviceLoopOnCpu): the sampler on
// tensors, the chosen ids fed back as tensors, zeroed caches and the static
// decode step that CUDA captures as a graph (decode_graph.h, eager here).
// Prompts of one chunk, one chunk plus one token and several chunks, a long
// prompt read beside running sequences, cancelling while a prompt is read,
// max_new_tokens 1, and the static step against the host loop's step.
//
// Every prompt longer than one prefill chunk used to fail on CUDA: a step in
// which the only work was a prompt chunk that did not end its prompt chose no
// token, and the device loop stacked an empty list of ids. The CPU never took
// that branch; these cases do.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

#include "daemon/engine/batch.h"
#include "daemon/engine/decode_graph.h"
#include "daemon/engine/generate.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/transformer.h"
#include "tests/engine/batch_test_util.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// The device-loop leg (MEDQ_TEST_DEVICE_LOOP_ON_CPU=1) runs the whole engine
// suite on the device loop: switched on before main(), and every ScopedSwitch
// of it restores it (DeviceLoopForced). The switch is a constant-initialized
// atomic, so this runs after it exists.
const bool g_forced_at_start = [] {
  if (DeviceLoopForced()) SetDeviceLoopOnCpu(true);
  return DeviceLoopForced();
}();

class DeviceLoopOn : public ScopedSwitch {
 public:
  DeviceLoopOn() : ScopedSwitch(&SetDeviceLoopOnCpu, true, DeviceLoopForced()) {}
};

BatchOptions Chunks(int chunk, int budget) {
  BatchOptions options;
  options.prefill_chunk_tokens = chunk;
  options.prefill_budget_tokens = budget;
  return options;
}

// The first fixture model in fp32 with its references, on the device loop.
struct OnDeviceLoop {
  const DeviceLoopOn loop;
  const fs::path dir = ModelFolders().front();
  const std::map<std::string, at::Tensor> ref = ReadTensors(dir / "reference.safetensors");
  const std::shared_ptr<const Model> model = MustLoad(dir, "fp32");
  const std::vector<int32_t> p1 = Ids(ref, "input_ids_prompt1");
  const std::vector<int32_t> p2 = Ids(ref, "input_ids_prompt2");
};

TEST_CASE("device loop: prompts of one chunk, one chunk plus one, several chunks",
          "[engine][device-loop]") {
  const DeviceLoopOn loop;
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir, "fp32");
    REQUIRE(UsesDeviceLoop(*model));
    const std::vector<int32_t> p1 = Ids(ref, "input_ids_prompt1");
    const std::vector<int32_t> p2 = Ids(ref, "input_ids_prompt2");
    const int n = static_cast<int>(std::max(p1.size(), p2.size()));
    // The longer prompt in one chunk; in one chunk and one token; in chunks of 3.
    for (const int chunk : {n, n - 1, 3}) {
      INFO("chunk " << chunk);
      const auto out =
          RunBatch(model, Chunks(chunk, chunk), {{0, Request(p1, 24)}, {0, Request(p2, 24)}});
      CHECK(out[0].tokens == Ids(ref, "greedy_prompt1"));
      CHECK(out[1].tokens == Ids(ref, "greedy_prompt2"));
    }
  }
}

TEST_CASE("device loop: a long prompt read in chunks beside running sequences",
          "[engine][device-loop]") {
  const OnDeviceLoop f;
  const auto& model = f.model;
  const auto& p1 = f.p1;
  const auto& p2 = f.p2;
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 6; ++i)
    long_prompt.insert(long_prompt.end(), p1.begin(), p1.end());
  const BatchOptions options = Chunks(4, 4);
  // Two sequences decode while the long prompt (many chunks) joins at step 3,
  // and a third, short one joins while it is still being read.
  const std::vector<Joining> requests = {{0, Request(p1, 30)},
                                         {1, Request(p2, 30)},
                                         {3, Request(long_prompt, 8)},
                                         {6, Request(p2, 5)}};
  const auto out = RunBatch(model, options, requests);
  CheckEachAsAlone(*model, requests, out);
}

TEST_CASE("device loop: cancelling a sequence while its prompt is read", "[engine][device-loop]") {
  const OnDeviceLoop f;
  const auto& ref = f.ref;
  const auto& model = f.model;
  const auto& p1 = f.p1;
  Batch batch(model, Chunks(3, 6));
  const SequenceId kept = *batch.Add(Request(p1, 24));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 8; ++i) {  // p1 read, a few tokens decoded
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (const SequenceStep& s : *steps)
      tokens.push_back(s.token);
  }
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 4; ++i)
    long_prompt.insert(long_prompt.end(), p1.begin(), p1.end());
  const SequenceId cancelled = *batch.Add(Request(long_prompt, 10));
  auto partial = batch.Step();  // one chunk of it
  REQUIRE(partial.ok());
  for (const SequenceStep& s : *partial) {
    CHECK(s.id == kept);
    tokens.push_back(s.token);
  }
  const GenerateResult gone = batch.Remove(cancelled);
  CHECK(gone.finish == FinishReason::kCancelled);
  CHECK(gone.new_tokens == 0);
  CHECK(gone.prompt_tokens == static_cast<int>(long_prompt.size()));
  while (!batch.empty()) {
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (const SequenceStep& s : *steps)
      tokens.push_back(s.token);
  }
  CHECK(tokens == Ids(ref, "greedy_prompt1"));
}

TEST_CASE("device loop: max_new_tokens 1 ends with the first token", "[engine][device-loop]") {
  const OnDeviceLoop f;
  const auto& ref = f.ref;
  const auto& model = f.model;
  const auto& p1 = f.p1;
  const auto out = RunBatch(model, Chunks(3, 512), {{0, Request(p1, 1)}, {0, Request(p1, 2)}});
  REQUIRE(out[0].result.has_value());
  CHECK(out[0].result->finish == FinishReason::kLength);
  CHECK(out[0].tokens == std::vector<int32_t>{Ids(ref, "greedy_prompt1")[0]});
  CHECK(Generated(*model, Request(p1, 1)) == out[0].tokens);
  CHECK(out[1].tokens.size() == 2);
}

TEST_CASE("Generate reports the device loop's wait for the device within its decode time",
          "[engine][device-loop]") {
  const OnDeviceLoop f;
  GenerateRequest r = Request(f.p1, 12);
  auto on_device = Generate(*f.model, r, [](int32_t) { return true; });
  REQUIRE(on_device.ok());
  CHECK(on_device->decode_wait_ms >= 0);
  CHECK(on_device->decode_wait_ms <= on_device->decode_ms);
  const ScopedSwitch host_loop(&SetDeviceLoopOnCpu, false, true);
  auto on_host = Generate(*f.model, r, [](int32_t) { return true; });
  REQUIRE(on_host.ok());
  CHECK(on_host->decode_wait_ms == 0);
}

// Sequences decoded by the model's DecodeGraphs and, beside them, each by
// Forward on a cache of its own; returns the largest logit difference of the
// step, and feeds each row its host step's argmax.
struct StaticRowsBeside {
  const Model& model;
  std::vector<std::unique_ptr<KvCache>> graph_caches, host_caches;
  std::vector<int64_t> next;

  void Add(const std::vector<int32_t>& prompt, int64_t extra_capacity) {
    const std::vector<int64_t> ids(prompt.begin(), prompt.end());
    const at::Tensor t = at::tensor(ids, at::kLong).view({1, -1});
    const int64_t capacity = static_cast<int64_t>(ids.size()) + extra_capacity;
    graph_caches.push_back(std::make_unique<KvCache>(model, 1, capacity, true));
    host_caches.push_back(std::make_unique<KvCache>(model, 1, capacity));
    Forward(model, t, *graph_caches.back(), LogitsFor::kLastPosition);
    next.push_back(Forward(model, t, *host_caches.back(), LogitsFor::kLastPosition)
                       .view({-1})
                       .argmax()
                       .item<int64_t>());
  }

  // One step of the sequences `which` (indices of Add order), in that row
  // order.
  double Step(const std::vector<size_t>& which) {
    std::vector<KvCache*> rows;
    std::vector<int64_t> ids;
    for (const size_t i : which) {
      rows.push_back(graph_caches[i].get());
      ids.push_back(next[i]);
    }
    const at::Tensor logits = DecodeGraphsOf(model).Step(rows, at::tensor(ids, at::kLong));
    REQUIRE(logits.sizes() ==
            at::IntArrayRef({static_cast<int64_t>(which.size()), model.config.vocab_size}));
    double worst = 0;
    for (size_t r = 0; r < which.size(); ++r) {
      const size_t i = which[r];
      const at::Tensor host = Forward(model, at::tensor({next[i]}, at::kLong).view({1, 1}),
                                      *host_caches[i], LogitsFor::kLastPosition)
                                  .view({-1});
      CHECK(graph_caches[i]->length() == host_caches[i]->length());
      worst = std::max(worst, MaxAbsDiff(logits[static_cast<int64_t>(r)], host));
      next[i] = host.argmax().item<int64_t>();
    }
    return worst;
  }
};

// The device loop run on the CPU keeps a batch's rows apart as the host
// loop does: three sequences stepped together (a bucket of four, one row of
// padding) give each the logits it gets stepped alone, bitwise, float32 and
// bf16 weights.
TEST_CASE("the static decode step on the CPU gives each row its solo logits, bitwise",
          "[engine][device-loop]") {
  c10::InferenceMode guard;
  for (const auto& dir : ModelFolders()) {
    for (const std::string dtype : {"fp32", "bf16"}) {
      INFO("model " << dir.filename().string() << " " << dtype);
      const auto ref = ReadTensors(dir / "reference.safetensors");
      const auto model = MustLoad(dir, dtype);
      // Sequence i's cache in the batch (2i) and alone (2i + 1).
      std::vector<std::unique_ptr<KvCache>> caches;
      std::vector<int64_t> next;
      for (const std::string p : {"prompt1", "prompt2", "prompt2"}) {
        const std::vector<int32_t> ids32 = Ids(ref, "input_ids_" + p);
        const at::Tensor ids =
            at::tensor(std::vector<int64_t>(ids32.begin(), ids32.end()), at::kLong).view({1, -1});
        // The third sequence reads one token less: rows at other positions.
        const at::Tensor prompt = next.size() == 2 ? ids.narrow(1, 0, ids.size(1) - 1) : ids;
        for (int copy = 0; copy < 2; ++copy) {
          caches.push_back(std::make_unique<KvCache>(*model, 1, prompt.size(1) + 8, true));
          const at::Tensor logits =
              Forward(*model, prompt, *caches.back(), LogitsFor::kLastPosition);
          if (copy == 0) next.push_back(logits.view({-1}).argmax().item<int64_t>());
        }
      }
      for (int step = 0; step < 4; ++step) {
        INFO("step " << step);
        std::vector<KvCache*> batch = {caches[0].get(), caches[2].get(), caches[4].get()};
        const at::Tensor together =
            DecodeGraphsOf(*model).Step(batch, at::tensor({next[0], next[1], next[2]}, at::kLong));
        for (size_t i = 0; i < 3; ++i) {
          std::vector<KvCache*> alone = {caches[2 * i + 1].get()};
          const at::Tensor solo =
              DecodeGraphsOf(*model).Step(alone, at::tensor({next[i]}, at::kLong));
          CHECK(MaxAbsDiff(together[static_cast<int64_t>(i)], solo[0]) == 0);
        }
        for (const auto& cache : caches)
          cache->Advance(1);
        for (size_t i = 0; i < 3; ++i)
          next[i] = together[static_cast<int64_t>(i)].argmax().item<int64_t>();
      }
    }
  }
}

TEST_CASE("the static decode step equals the host loop's step, rows at their own positions",
          "[engine][device-loop]") {
  c10::InferenceMode guard;
  CHECK(DecodeGraphs::BucketFor(1) == 1);
  CHECK(DecodeGraphs::BucketFor(3) == 4);
  CHECK(DecodeGraphs::BucketFor(5) == 8);
  CHECK(DecodeGraphs::BucketFor(16) == 16);
  CHECK(DecodeGraphs::BucketFor(17) == 32);
  for (const auto& dir : ModelFolders()) {
    INFO("model " << dir.filename().string());
    const auto ref = ReadTensors(dir / "reference.safetensors");
    const auto model = MustLoad(dir, "fp32");
    StaticRowsBeside s{*model, {}, {}, {}};
    // Three sequences at different positions and capacities: a bucket of
    // four rows, one of them padding.
    s.Add(Ids(ref, "input_ids_prompt1"), 12);
    s.Add(Ids(ref, "input_ids_prompt2"), 15);
    s.Add(Ids(ref, "input_ids_prompt1"), 9);
    const DecodeGraphs& graphs = DecodeGraphsOf(*model);
    const int64_t uploads = graphs.table_uploads();
    // Float rounding of another summation order (the whole capacity under a
    // mask, the heads of a group as rows): up to 1.4e-4 seen on the
    // fixtures; a wrong position, a stale key or a padding row's write into
    // a sequence's cache moves them > 1e-2.
    for (int step = 0; step < 3; ++step) {
      INFO("step " << step);
      CHECK(s.Step({0, 1, 2}) < 1e-3);
    }
    // The same rows step after step: their tables were written once.
    CHECK(graphs.table_uploads() == uploads + 1);
    // One leaves (another bucket), then the rows come back in another order:
    // the bucket of four is bound to them anew, and still each row is its
    // own sequence's.
    CHECK(s.Step({2, 0}) < 1e-3);
    CHECK(s.Step({1, 2, 0}) < 1e-3);
    CHECK(s.Step({1, 2, 0}) < 1e-3);
    CHECK(graphs.table_uploads() == uploads + 3);
    CHECK_FALSE(graphs.captured(4));
  }
}

}  // namespace
}  // namespace medq::engine::test
