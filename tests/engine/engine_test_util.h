// Helpers shared by the engine tests: reference tensors, fixture folders,
// temporary directories and a direct forward pass.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/engine/engine.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"
#include "daemon/engine/safetensors.h"
#include "daemon/engine/tensor_view.h"
#include "daemon/engine/transformer.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace medq::engine::test {

namespace fs = std::filesystem;

// Sets one of the engine's test switches (SetCpuDecodeStepEnabled,
// SetDeviceLoopOnCpu, ...) for its scope, and back even when a check fails.
class ScopedSwitch {
 public:
  ScopedSwitch(void (*set)(bool), bool value, bool restore) : set_(set), restore_(restore) {
    set_(value);
  }
  ~ScopedSwitch() { set_(restore_); }
  ScopedSwitch(const ScopedSwitch&) = delete;
  ScopedSwitch& operator=(const ScopedSwitch&) = delete;

 private:
  void (*set_)(bool);
  bool restore_;
};

// Whether this run forces the device loop on the CPU for every test
// (MEDQ_TEST_DEVICE_LOOP_ON_CPU=1: the device-loop leg of scripts/test). A
// ScopedSwitch of SetDeviceLoopOnCpu restores this, not false.
inline bool DeviceLoopForced() {
  const char* v = std::getenv("MEDQ_TEST_DEVICE_LOOP_ON_CPU");
  return v != nullptr && std::string(v) == "1";
}

// Every tensor of a safetensors file, read with the engine's own reader.
inline std::map<std::string, at::Tensor> ReadTensors(const fs::path& path) {
  auto file = SafetensorsFile::Open(path);
  if (!file.ok()) throw std::runtime_error(file.error().message);
  std::map<std::string, at::Tensor> out;
  for (const auto& info : (*file)->tensors())
    out[info.name] = TensorView(*file, info).clone();
  return out;
}

// Fixture model folders holding a config.json (the LoRA adapter folder has
// none): the shared fixtures, and the project's own (data/models, made by
// tools/model_fixtures: a Qwen3 with q/k norms, saved by transformers 5).
inline std::vector<fs::path> ModelFolders() {
  std::vector<fs::path> out;
  for (const fs::path& root : {medq::test::SharedDir() / "fixtures" / "models",
                               fs::path(MEDQ_ENGINE_TEST_DATA) / "models"}) {
    for (const auto& e : fs::directory_iterator(root)) {
      if (e.is_directory() && fs::exists(e.path() / "config.json")) out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::shared_ptr<const Model> MustLoad(const fs::path& dir, const std::string& dtype = "auto",
                                             const std::string& device = "cpu") {
  auto m = LoadModel(dir, LoadOptions{device, dtype});
  if (!m.ok()) throw std::runtime_error(m.error().message);
  return *m;
}

inline std::vector<int32_t> ToIds(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int32_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Logits [T, vocab] at every position of `ids` in one forward pass.
inline at::Tensor AllLogits(const Model& m, const at::Tensor& ids) {
  c10::InferenceMode guard;
  KvCache cache(m, 1, ids.numel());
  return Forward(m, ids.to(at::kLong).view({1, -1}), cache, LogitsFor::kAllPositions)[0].clone();
}

inline double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// How far medq's int4 and int8 products, which round x to int8 in blocks of
// 32 (dense_kernels.h), may move the tiny random-weight fixtures' logits
// from the same weights with x unrounded: of the largest logit, and by
// relative L2 (int8 weights' bounds, quantize_test.cc: the same step).
inline constexpr double kXRoundingMaxDiff = 0.1;
inline constexpr double kXRoundingRelL2 = 0.05;

// Whether two float32 computations of the same logits differ by no more than
// the rounding of different summation orders: 4e-6 of the largest logit,
// about 30 float32 ulps there (measured across the fixtures: up to 1.5e-6 of
// it between the cached decode step and a full recompute). A real fault (a
// wrong cache position, stale keys, a missed mask) moves logits by > 1e-2.
inline bool SameLogits(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  return MaxAbsDiff(a, b) <= 4e-6 * scale;
}

// Greedy ids with no EOS stop.
inline std::vector<int32_t> Greedy(const Model& m, const std::vector<int32_t>& prompt, int n) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_new_tokens = n;
  r.stop_ids = std::vector<int32_t>{};
  std::vector<int32_t> out;
  auto res = Generate(m, r, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  if (!res.ok()) throw std::runtime_error(res.error().message);
  return out;
}

using medq::test::TempDir;

inline void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace medq::engine::test
