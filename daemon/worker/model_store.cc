#include "daemon/worker/model_store.h"

#include <spdlog/spdlog.h>

#include "daemon/engine/device_memory.h"

namespace medq::daemon {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string KeyOf(const fs::path& dir, const fs::path& adapter) {
  return adapter.empty() ? dir.string() : dir.string() + "+" + adapter.string();
}

}  // namespace

std::string ModelStore::ResolveDevice() const {
  if (policy_.device != "auto") return policy_.device;
  return engine::CudaAvailable() ? "cuda:0" : "cpu";
}

// (Also on a CPU-only machine, where only an injected fault gets here: the
// retry then exercises the same path.)
bool ModelStore::FallsBackToCpu(const Error& error) const {
  return error.code == ErrorCode::kGpuOom && policy_.cpu_fallback;
}

// On the CPU, fp16 has no kernels (a GPU fallback loads auto instead), and
// under auto an adapter merges into float32 weights: merged into bf16 ones,
// W + BA would round the adapter's small deltas away, and on the CPU bf16 is
// only a storage choice (the kernels compute in float32 either way).
std::string ModelStore::CpuDtype(bool for_merge) const {
  if (policy_.dtype != "auto" && policy_.dtype != "fp16") return policy_.dtype;
  return for_merge ? "fp32" : "auto";
}

Result<std::shared_ptr<const engine::Model>> ModelStore::LoadOnCpu(const fs::path& dir,
                                                                   bool for_merge) {
  engine::EmptyDeviceCaches();
  return engine::LoadModel(dir, {"cpu", CpuDtype(for_merge)});
}

Result<std::shared_ptr<const engine::Model>> ModelStore::LoadWeights(const fs::path& dir,
                                                                     bool for_merge,
                                                                     bool* fell_back) {
  const std::string device = ResolveDevice();
  const std::string dtype =
      device == "cpu" && policy_.dtype == "auto" ? CpuDtype(for_merge) : policy_.dtype;
  auto model = engine::LoadModel(dir, {device, dtype});
  if (!model.ok() && FallsBackToCpu(model.error())) {
    spdlog::warn(
        "out of GPU memory loading {}; loading it on the CPU instead (gpu_fallback = "
        "cpu). Free GPU memory or pick a smaller model to run it on the GPU.",
        dir.string());
    *fell_back = true;
    model = LoadOnCpu(dir, for_merge);
  }
  return model;
}

Result<LoadedModel> ModelStore::Load(const std::string& name, const fs::path& dir,
                                     const fs::path& adapter) {
  const auto t0 = Clock::now();
  LoadedModel m;
  m.key = KeyOf(dir, adapter);
  m.name = adapter.empty() ? name : name + "+" + adapter.filename().string();

  // The base model may already be loaded for other requests: share it.
  std::shared_ptr<const engine::Model> base;
  for (const LoadedModel& other : models_) {
    if (other.key == dir.string()) base = other.model;
  }
  if (!base) {
    auto loaded = LoadWeights(dir, /*for_merge=*/!adapter.empty(), &m.fell_back_to_cpu);
    if (!loaded.ok()) return std::move(loaded).error();
    base = std::move(*loaded);
  }
  if (adapter.empty()) {
    m.model = std::move(base);
  } else {
    // A base shared with requests without the adapter may hold bf16 weights
    // on the CPU; the adapted model then gets float32 ones of its own.
    const engine::ModelInfo& info = engine::Info(*base);
    if (info.device == "cpu" && info.dtype == "bf16" && CpuDtype(/*for_merge=*/true) == "fp32") {
      auto wide = LoadOnCpu(dir, /*for_merge=*/true);
      if (!wide.ok()) return std::move(wide).error();
      base = std::move(*wide);
    }
    auto adapted = engine::ApplyAdapter(base, adapter);
    if (!adapted.ok() && FallsBackToCpu(adapted.error())) {
      // The merge copies the targeted weights on the device; when that does
      // not fit, the adapted model goes to the CPU like a load that does not
      // fit (the base stays where it is for requests without the adapter).
      spdlog::warn(
          "out of GPU memory merging adapter {} into {}; running the adapted model on the CPU "
          "instead (gpu_fallback = cpu)",
          adapter.filename().string(), name);
      auto cpu_base = LoadOnCpu(dir, /*for_merge=*/true);
      if (!cpu_base.ok()) return std::move(cpu_base).error();
      m.fell_back_to_cpu = true;
      adapted = engine::ApplyAdapter(*cpu_base, adapter);
    }
    if (!adapted.ok()) return std::move(adapted).error();
    m.model = std::move(*adapted);
  }

  if (fs::exists(dir / "tokenizer.json")) {
    auto tok = tokenizer::Tokenizer::FromModelDir(dir);
    if (!tok.ok()) return std::move(tok).error();
    m.tokenizer = std::move(*tok);
  }
  if (fs::exists(dir / "tokenizer_config.json")) {
    auto tmpl = chat::ChatTemplate::FromTokenizerConfig(dir / "tokenizer_config.json");
    if (tmpl.ok()) {
      m.chat_template = std::move(*tmpl);
    } else {
      spdlog::debug("{}: no usable chat template ({})", name, tmpl.error().message);
    }
  }
  m.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return m;
}

Result<LoadedModel*> ModelStore::Acquire(const std::string& name, const fs::path& dir,
                                         const fs::path& adapter) {
  const std::string key = KeyOf(dir, adapter);
  for (auto it = models_.begin(); it != models_.end(); ++it) {
    if (it->key == key) {
      models_.splice(models_.begin(), models_, it);  // most recently used first
      models_.front().last_used = Clock::now();
      return &models_.front();
    }
  }
  // Make room first: a model being replaced should not share the GPU with
  // its successor while that one loads.
  while (static_cast<int>(models_.size()) >= std::max(1, policy_.max_loaded)) {
    spdlog::info("unloading {} (least recently used; max_loaded_models = {})", models_.back().name,
                 policy_.max_loaded);
    models_.pop_back();
    engine::EmptyDeviceCaches();
  }
  auto loaded = Load(name, dir, adapter);
  if (!loaded.ok()) {
    engine::EmptyDeviceCaches();
    return std::move(loaded).error();
  }
  const engine::ModelInfo& info = engine::Info(*loaded->model);
  spdlog::info("loaded {} ({}, {} on {}, {:.0f} MiB of weights) in {:.0f} ms", loaded->name,
               info.architecture, info.dtype, info.device,
               static_cast<double>(info.parameter_bytes) / (1 << 20), loaded->load_ms);
  loaded->last_used = Clock::now();
  models_.push_front(std::move(*loaded));
  ++loads_;
  return &models_.front();
}

bool ModelStore::Unload(const std::string& key_or_name) {
  const auto before = models_.size();
  models_.remove_if(
      [&](const LoadedModel& m) { return m.key == key_or_name || m.name == key_or_name; });
  if (models_.size() == before) return false;
  engine::EmptyDeviceCaches();
  return true;
}

std::vector<std::string> ModelStore::UnloadIdle(Clock::duration idle) {
  std::vector<std::string> names;
  const auto now = Clock::now();
  models_.remove_if([&](const LoadedModel& m) {
    if (now - m.last_used < idle) return false;
    names.push_back(m.name);
    return true;
  });
  if (!names.empty()) engine::EmptyDeviceCaches();
  return names;
}

}  // namespace medq::daemon
