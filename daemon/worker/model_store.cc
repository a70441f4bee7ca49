#include "daemon/worker/model_store.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/engine/device_memory.h"

namespace medq::daemon {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// The quantization a model is loaded with: its name's suffix ("qwen:int4",
// model_resolver.h), else the policy's.
std::string QuantizeOf(const std::string& name, const std::string& policy) {
  auto split = SplitModelName(name);
  return split.ok() && !split->quantize.empty() ? split->quantize : policy;
}

// A quantization other than the policy's makes a model of its own.
std::string KeyOf(const fs::path& dir, const fs::path& adapter, const std::string& quantize,
                  const std::string& policy) {
  std::string key = adapter.empty() ? dir.string() : dir.string() + "+" + adapter.string();
  return quantize == policy ? key : key + ":" + quantize;
}

// One embed of a short text: the first real request then finds kernels and
// allocator warm, and a model that cannot embed on its device fails here.
Status WarmUpEmbedding(const engine::EmbeddingModel& model) {
  const int64_t length = std::min<int64_t>(8, engine::Info(model).max_seq_length);
  const std::vector<std::vector<int32_t>> ids = {
      std::vector<int32_t>(static_cast<size_t>(length), 0)};
  auto vectors = engine::Embed(model, ids);
  if (!vectors.ok()) {
    return Error(vectors.error().code, "warm-up embed on " + engine::Info(model).device +
                                           " failed: " + vectors.error().message);
  }
  return Status::Ok();
}

}  // namespace

const char* ModelKindName(ModelKind kind) {
  return kind == ModelKind::kEmbedding ? "embedding" : "generation";
}

Status RequireKind(const std::string& name, ModelKind is, ModelKind want) {
  if (is == want) return Status::Ok();
  return InvalidField("model", "params.model: " + name +
                                   (is == ModelKind::kEmbedding
                                        ? " is an embedding model; use the embed op with it"
                                        : " is a generation model; use the generate op with it"));
}

LoadedModelInfo LoadedModel::Describe() const {
  LoadedModelInfo out;
  out.name = name;
  out.kind = ModelKindName(kind());
  out.fell_back_to_cpu = fell_back_to_cpu;
  out.has_tokenizer = tokenizer != nullptr;
  out.has_chat_template = chat_template.has_value();
  out.idle_s = std::chrono::duration<double>(Clock::now() - last_used).count();
  if (embedding) {
    const engine::EmbeddingInfo& info = engine::Info(*embedding);
    out.architecture = info.architecture;
    out.device = info.device;
    out.dtype = info.dtype;
    out.parameter_bytes = info.parameter_bytes;
    out.dims = info.dims;
  } else {
    const engine::ModelInfo& info = engine::Info(*model);
    out.architecture = info.architecture;
    out.device = info.device;
    out.dtype = info.dtype;
    out.quantization = info.quantization;
    out.quantized_embeddings = info.quantized_embeddings;
    out.parameter_bytes = info.parameter_bytes;
  }
  return out;
}

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

engine::LoadOptions ModelStore::Options(const std::string& device, const std::string& dtype,
                                        bool for_merge, const std::string& quantize) const {
  engine::LoadOptions o{device, dtype, policy_.pack_for_batches};
  o.quantize = for_merge ? "none" : quantize;
  o.quantize_embeddings = policy_.quantize_embeddings;
  return o;
}

Result<std::shared_ptr<const engine::Model>> ModelStore::LoadOnCpu(const fs::path& dir,
                                                                   bool for_merge,
                                                                   const std::string& quantize) {
  engine::EmptyDeviceCaches();
  return engine::LoadModel(dir, Options("cpu", CpuDtype(for_merge), for_merge, quantize));
}

Result<std::shared_ptr<const engine::Model>> ModelStore::LoadWeights(const fs::path& dir,
                                                                     bool for_merge,
                                                                     const std::string& quantize,
                                                                     bool* fell_back) {
  const std::string device = ResolveDevice();
  const std::string dtype =
      device == "cpu" && policy_.dtype == "auto" ? CpuDtype(for_merge) : policy_.dtype;
  auto model = engine::LoadModel(dir, Options(device, dtype, for_merge, quantize));
  if (!model.ok() && FallsBackToCpu(model.error())) {
    spdlog::warn(
        "out of GPU memory loading {}; loading it on the CPU instead (gpu_fallback = "
        "cpu). Free GPU memory or pick a smaller model to run it on the GPU.",
        dir.string());
    *fell_back = true;
    model = LoadOnCpu(dir, for_merge, quantize);
  }
  return model;
}

// An embedding model: its encoder (on the GPU when there is one, falling
// back to the CPU like a generation model), the tokenizer of its Transformer
// module, and a warm-up embed.
Result<LoadedModel> ModelStore::LoadEmbedding(const std::string& name, const fs::path& dir) {
  const auto t0 = Clock::now();
  LoadedModel m;
  m.key = dir.string();
  m.name = name;
  const std::string device = ResolveDevice();
  // fp16 has no CPU kernels; elsewhere the policy's dtype applies as it is.
  const std::string cpu_dtype = policy_.dtype == "fp16" ? "auto" : policy_.dtype;
  auto model =
      engine::LoadEmbeddingModel(dir, {device, device == "cpu" ? cpu_dtype : policy_.dtype});
  if (!model.ok() && FallsBackToCpu(model.error())) {
    spdlog::warn("out of GPU memory loading {}; loading it on the CPU instead (gpu_fallback = cpu)",
                 dir.string());
    engine::EmptyDeviceCaches();
    m.fell_back_to_cpu = true;
    model = engine::LoadEmbeddingModel(dir, {"cpu", cpu_dtype});
  }
  if (!model.ok()) return std::move(model).error();
  m.embedding = std::move(*model);
  const fs::path tokenizer_dir = engine::Info(*m.embedding).tokenizer_dir;
  auto tok = tokenizer::Tokenizer::FromModelDir(tokenizer_dir);
  if (!tok.ok()) return std::move(tok).error();
  m.tokenizer = std::move(*tok);
  if (Status st = WarmUpEmbedding(*m.embedding); !st.ok()) return st.error();
  m.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return m;
}

Result<LoadedModel> ModelStore::Load(const std::string& name, const fs::path& dir,
                                     const fs::path& adapter) {
  if (engine::IsEmbeddingModelDir(dir)) {
    if (!adapter.empty()) {
      return InvalidField("adapter",
                          "params.adapter: " + name +
                              " is an embedding model; adapters apply to generation models only");
    }
    return LoadEmbedding(name, dir);
  }
  const auto t0 = Clock::now();
  LoadedModel m;
  const std::string quantize = QuantizeOf(name, policy_.quantize);
  m.key = KeyOf(dir, adapter, quantize, policy_.quantize);
  m.name = adapter.empty() ? name : name + "+" + adapter.filename().string();

  // A quantized adapted model for a GPU is merged and quantized in host
  // memory and only then goes to the GPU (engine::ApplyAdapter's device):
  // its base in full precision may not fit there (a 7B model in bf16 on a
  // 6 GB card). The base is bf16 there unless dtype = fp32 asks for float32:
  // as PEFT merges into a bf16 base, and half the host memory of float32
  // (14.5 GB for a 7B model, not 29), for weights quantized right after.
  const std::string device = ResolveDevice();
  const bool quantized_for_gpu = !adapter.empty() && quantize != "none" && device != "cpu";
  // The base model may already be loaded for other requests: share it.
  std::shared_ptr<const engine::Model> base;
  for (const LoadedModel& other : models_) {
    if (!quantized_for_gpu && other.key == KeyOf(dir, {}, quantize, policy_.quantize)) {
      base = other.model;
    }
  }
  if (quantized_for_gpu) {
    auto loaded = engine::LoadModel(dir, Options("cpu", policy_.dtype == "fp32" ? "fp32" : "bf16",
                                                 /*for_merge=*/true, quantize));
    if (!loaded.ok()) return std::move(loaded).error();
    base = std::move(*loaded);
  } else if (!base) {
    auto loaded = LoadWeights(dir, /*for_merge=*/!adapter.empty(), quantize, &m.fell_back_to_cpu);
    if (!loaded.ok()) return std::move(loaded).error();
    base = std::move(*loaded);
  }
  if (adapter.empty()) {
    m.model = std::move(base);
  } else {
    // A base shared with requests without the adapter may hold bf16 weights
    // on the CPU, or quantized ones; the adapted model then gets float32 (or
    // unquantized) ones of its own.
    const engine::ModelInfo& info = engine::Info(*base);
    if (!quantized_for_gpu &&
        ((info.device == "cpu" && info.dtype == "bf16" && CpuDtype(/*for_merge=*/true) == "fp32") ||
         info.quantization != "none")) {
      auto wide = LoadOnCpu(dir, /*for_merge=*/true, quantize);
      if (!wide.ok()) return std::move(wide).error();
      base = std::move(*wide);
    }
    auto adapted = engine::ApplyAdapter(
        base, adapter, quantize, engine::LoadOptions{}.quantize_group, policy_.quantize_embeddings,
        quantized_for_gpu ? device : "", policy_.dtype);
    if (!adapted.ok() && FallsBackToCpu(adapted.error())) {
      // The merge copies the targeted weights on the device; when that does
      // not fit, the adapted model goes to the CPU like a load that does not
      // fit (the base stays where it is for requests without the adapter).
      spdlog::warn(
          "out of GPU memory merging adapter {} into {}; running the adapted model on the CPU "
          "instead (gpu_fallback = cpu)",
          adapter.filename().string(), name);
      auto cpu_base = quantized_for_gpu ? Result<std::shared_ptr<const engine::Model>>(base)
                                        : LoadOnCpu(dir, /*for_merge=*/true, quantize);
      if (!cpu_base.ok()) return std::move(cpu_base).error();
      m.fell_back_to_cpu = true;
      engine::EmptyDeviceCaches();
      adapted =
          engine::ApplyAdapter(*cpu_base, adapter, quantize, engine::LoadOptions{}.quantize_group,
                               policy_.quantize_embeddings);
    }
    if (!adapted.ok()) return std::move(adapted).error();
    m.model = std::move(*adapted);
  }

  if (fs::exists(dir / "tokenizer.json")) {
    auto tok = tokenizer::Tokenizer::FromModelDir(dir);
    if (!tok.ok()) return std::move(tok).error();
    m.tokenizer = std::move(*tok);
  }
  if (auto tmpl = chat::ChatTemplate::FromModelDir(dir); tmpl.ok()) {
    m.chat_template = std::move(*tmpl);
  } else {
    spdlog::debug("{}: no usable chat template ({})", name, tmpl.error().message);
  }
  m.load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return m;
}

Result<LoadedModel*> ModelStore::Acquire(const std::string& name, const fs::path& dir,
                                         const fs::path& adapter) {
  const std::string key = KeyOf(dir, adapter, QuantizeOf(name, policy_.quantize), policy_.quantize);
  for (auto it = models_.begin(); it != models_.end(); ++it) {
    if (it->key == key) {
      models_.splice(models_.begin(), models_, it);  // most recently used first
      models_.front().last_used = Clock::now();
      return &models_.front();
    }
  }
  // Make room first: a model being replaced should not share the GPU with
  // its successor while that one loads.
  const ModelKind kind =
      engine::IsEmbeddingModelDir(dir) ? ModelKind::kEmbedding : ModelKind::kGeneration;
  auto of_kind = [&] {
    return std::count_if(models_.begin(), models_.end(),
                         [&](const LoadedModel& m) { return m.kind() == kind; });
  };
  while (of_kind() >= std::max(1, policy_.max_loaded)) {
    auto lru = std::find_if(models_.rbegin(), models_.rend(),
                            [&](const LoadedModel& m) { return m.kind() == kind; });
    spdlog::info("unloading {} (least recently used {} model; max_loaded_models = {})", lru->name,
                 ModelKindName(kind), policy_.max_loaded);
    models_.erase(std::next(lru).base());
    engine::EmptyDeviceCaches();
  }
  auto loaded = Load(name, dir, adapter);
  if (!loaded.ok()) {
    engine::EmptyDeviceCaches();
    return std::move(loaded).error();
  }
  const LoadedModelInfo info = loaded->Describe();
  spdlog::info("loaded {} {} ({}, {}{} on {}, {:.0f} MiB of weights) in {:.0f} ms", info.kind,
               loaded->name, info.architecture, info.dtype,
               info.quantization == "none" ? "" : " + " + info.quantization, info.device,
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
