// How many LibTorch ops one decode step dispatches per layer on the generic
// path (the path CUDA takes; on the CPU the raw-buffer decode step replaces
// it). A RecordFunction observer counts the ops the engine itself calls
// (nested ops inside them are not counted), leaving out views (narrow, view,
// transpose, ...: metadata only, no kernel). Each op counted is a dispatch
// and, on a GPU, a kernel launch. The per-layer count is the difference
// between the model and the same model cut to its first layer, so that the
// embedding, final norm and lm_head cancel. The bound fails the test when a
// layer grows; the count is printed for the record. The batched step
// (ForwardRows) is counted the same way, and what each sequence beyond the
// first adds to a layer is bounded too.
#include <ATen/record_function.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/engine/batch.h"
#include "daemon/engine/batch_forward.h"
#include "daemon/engine/decode_step.h"
#include "daemon/engine/generate.h"
#include "daemon/engine/model.h"
#include "daemon/engine/torch_version.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

thread_local int t_depth = 0;
std::atomic<int64_t> g_top_level_ops{0};
thread_local std::vector<std::string> t_names;

bool IsView(std::string_view name) {
  for (std::string_view view :
       {"aten::narrow", "aten::view", "aten::transpose", "aten::reshape", "aten::_reshape_alias",
        "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze", "aten::expand",
        "aten::permute", "aten::as_strided", "aten::t", "aten::alias", "aten::detach"}) {
    if (name == view) return true;
  }
  return false;
}

// Counts top-level ATen ops on this thread while alive.
class OpCounter {
 public:
  OpCounter() {
    g_top_level_ops = 0;
    t_names.clear();
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              if (t_depth++ == 0 && !IsView(fn.name())) {
                ++g_top_level_ops;
                t_names.emplace_back(fn.name());
              }
              return nullptr;
            },
            [](const at::RecordFunction&, at::ObserverContext*) { --t_depth; })
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~OpCounter() { at::removeCallback(handle_); }
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  int64_t count() const { return g_top_level_ops.load(); }
  // The ops in the order they ran, joined by spaces.
  static std::string Names() {
    std::string out;
    for (const std::string& n : t_names)
      out += n + " ";
    return out;
  }

 private:
  at::CallbackHandle handle_;
};

// The ops of one decode step after a short prefill, on the generic path.
int64_t OpsPerDecodeStep(const Model& m, std::string* names) {
  c10::InferenceMode guard;
  const ScopedSwitch generic_path(&SetCpuDecodeStepEnabled, false, true);
  KvCache cache(m, 1, 8);
  Forward(m, at::tensor({1, 2, 3, 4}, at::kLong).view({1, -1}), cache, LogitsFor::kLastPosition);
  int64_t ops = 0;
  {
    OpCounter counter;
    Forward(m, at::tensor({5}, at::kLong).view({1, 1}), cache, LogitsFor::kLastPosition);
    ops = counter.count();
    *names = OpCounter::Names();
  }
  return ops;
}

// The ops of one batched decode step of n sequences (ForwardRows), each after
// a short prefill of its own length, on the generic path.
int64_t OpsPerBatchedStep(const Model& m, int64_t n, std::string* names) {
  c10::InferenceMode guard;
  const ScopedSwitch generic_path(&SetCpuDecodeStepEnabled, false, true);
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<KvCache*> pointers;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    caches.push_back(std::make_unique<KvCache>(m, 1, 8));
    Forward(m, at::arange(1, 3 + i, at::kLong).view({1, -1}), *caches.back(),
            LogitsFor::kLastPosition);
    pointers.push_back(caches.back().get());
    ids.push_back(5 + i);
  }
  OpCounter counter;
  ForwardRows(m, ids, pointers);
  *names = OpCounter::Names();
  return counter.count();
}

#if MEDQ_TORCH_AT_LEAST(2, 5)
// rms_norm (1 op, x2), qkv and gate_up projections (2), one rotation for q
// and k (5), the KV cache writes (2), fused attention (1), silu * up (2);
// o_proj and down_proj add into the residual stream inside the projection.
constexpr int64_t kOpsPerLayer = 14;
// What one more sequence adds to a batched step's layer: its KV cache
// writes (2) and its attention (1); the q/k norms and RoPE run once for
// all rows.
constexpr int64_t kOpsPerExtraSequence = 3;
#else
// LibTorch 1.13: RMSNorm in six ops and attention in five (no rms_norm, no
// grouped-query scaled_dot_product_attention).
constexpr int64_t kOpsPerLayer = 28;
constexpr int64_t kOpsPerExtraSequence = 7;
#endif

TEST_CASE("a generic decode step dispatches at most a fixed number of ops per layer",
          "[engine][ops]") {
  int measured = 0;
  for (const auto& dir : ModelFolders()) {
    const auto model = MustLoad(dir, "fp32");
    if (model->config.qk_norm) continue;  // Qwen3's q/k norms: two more ops, not a fixture here
    ++measured;
    Model first = *model;
    first.weights.layers.resize(1);
    std::string names, first_names;
    const int64_t ops = OpsPerDecodeStep(*model, &names);
    const int64_t first_ops = OpsPerDecodeStep(first, &first_names);
    const auto layers = static_cast<int64_t>(model->weights.layers.size());
    REQUIRE(layers >= 2);
    const int64_t per_layer = (ops - first_ops) / (layers - 1);
    INFO("ops of the whole step: " << names);
    WARN("op count: " << dir.filename().string() << ": " << per_layer << " ops per layer, " << ops
                      << " in one decode step of " << layers << " layers");
    CHECK((ops - first_ops) % (layers - 1) == 0);  // every layer the same
    CHECK(per_layer > 0);                          // the observer saw the step
    CHECK(per_layer <= kOpsPerLayer);
  }
  CHECK(measured > 0);  // the bound was checked on some model
}

TEST_CASE("a batched generic step adds only cache writes and attention per sequence",
          "[engine][ops][batch]") {
  // Two and four sequences: from two rows on, every projection takes the same
  // path (on the CPU one row takes the own matrix-vector kernels, which
  // dispatch fewer ops than at::linear), so what four add over two is their
  // two more sequences' own ops.
  constexpr int64_t kFew = 2, kMore = 4;
  int measured = 0;
  for (const auto& dir : ModelFolders()) {
    const auto model = MustLoad(dir, "fp32");
    ++measured;
    Model first = *model;
    first.weights.layers.resize(1);
    const auto layers = static_cast<int64_t>(model->weights.layers.size());
    REQUIRE(layers >= 2);
    int64_t per_layer[2] = {0, 0};
    const int64_t sizes[2] = {kFew, kMore};
    for (int s = 0; s < 2; ++s) {
      std::string names, first_names;
      const int64_t ops = OpsPerBatchedStep(*model, sizes[s], &names);
      const int64_t first_ops = OpsPerBatchedStep(first, sizes[s], &first_names);
      INFO(sizes[s] << " sequences, ops of the whole step: " << names);
      CHECK((ops - first_ops) % (layers - 1) == 0);  // every layer the same
      per_layer[s] = (ops - first_ops) / (layers - 1);
      CHECK(per_layer[s] > 0);
    }
    WARN("batched op count: " << dir.filename().string() << ": " << per_layer[0]
                              << " ops per layer for " << kFew << " sequences, " << per_layer[1]
                              << " for " << kMore);
    CHECK(per_layer[1] - per_layer[0] <= (kMore - kFew) * kOpsPerExtraSequence);
  }
  CHECK(measured > 0);
}

// How often `op` ran at the top level in the counter's names.
int64_t Occurrences(const std::string& names, const std::string& op) {
  int64_t n = 0;
  for (size_t at = names.find(op + " "); at != std::string::npos;
       at = names.find(op + " ", at + 1)) {
    if (at == 0 || names[at - 1] == ' ') ++n;
  }
  return n;
}

TEST_CASE("the device loop chooses the tokens of any number of greedy rows with one argmax",
          "[engine][ops][device-loop]") {
  // Greedy rows without a penalty or constraint (the usual extraction
  // request) are picked together (batch.cc, ChooseTokens): on a GPU each op
  // of a row's own choice would be a launch, so the step's host time would
  // grow with the rows. Counted on the CPU run of the device loop.
  const ScopedSwitch loop(&SetDeviceLoopOnCpu, true, DeviceLoopForced());
  const auto model = MustLoad(ModelFolders().front(), "fp32");
  int64_t ops_of[9] = {};
  for (const int rows : {1, 2, 4, 8}) {
    INFO(rows << " rows");
    Batch batch(model, BatchOptions{});
    for (int i = 0; i < rows; ++i) {
      GenerateRequest r;
      r.prompt = {1, 2, 3 + i};
      r.max_new_tokens = 8;
      r.stop_ids = std::vector<int32_t>{};
      REQUIRE(batch.Add(r).ok());
    }
    REQUIRE(batch.Step().ok());  // the prompts, and each row's first token
    OpCounter counter;
    auto step = batch.Step();  // every row decodes
    REQUIRE(step.ok());
    REQUIRE(step->size() == static_cast<size_t>(rows));
    const std::string names = OpCounter::Names();
    INFO("ops of the step: " << names);
    ops_of[rows] = counter.count();
    CHECK(Occurrences(names, "aten::argmax") == 1);
  }
  WARN("device-loop step ops (CPU, first fixture), 1/2/4/8 greedy rows: "
       << ops_of[1] << "/" << ops_of[2] << "/" << ops_of[4] << "/" << ops_of[8]);
}

}  // namespace
}  // namespace medq::engine::test
