#include "daemon/worker/tasks.h"

#include "daemon/engine/engine.h"
#include "daemon/worker/generation.h"
#include "daemon/worker/memory.h"
#include "daemon/worker/worker.h"

namespace medq::daemon {
namespace {

Error NoTokenizer(const LoadedModel& m) {
  return Error(ErrorCode::kInvalidRequest, "model " + m.name + " has no tokenizer.json");
}

}  // namespace

Result<LoadedModel*> AcquireModel(Worker& worker, const ModelLocation& where) {
  return worker.models().Acquire(where.name, where.dir, where.adapter_dir);
}

Result<LoadResult> DescribeLoad(const LoadedModel& model) {
  const LoadedModelInfo info = model.Describe();
  return LoadResult{model.name, info.device, info.dtype, model.load_ms};
}

Result<UnloadResult> UnloadModel(Worker& worker, const std::string& name) {
  const bool unloaded = worker.models().Unload(name);
  if (!worker.generations().busy()) ReleaseCachedMemory();
  if (!unloaded)
    return Error(ErrorCode::kModelNotFound, "model \"" + Echo(name) + "\" is not loaded");
  return UnloadResult{name, true};
}

Result<TokenizeResult> TokenizeText(const LoadedModel& model, const std::string& text,
                                    bool add_special_tokens) {
  if (!model.tokenizer) return NoTokenizer(model);
  TokenizeResult out;
  out.ids = model.tokenizer->Encode(text, add_special_tokens);
  out.tokens.reserve(out.ids.size());
  for (int32_t id : out.ids)
    out.tokens.push_back(model.tokenizer->IdToToken(id));
  return out;
}

Result<DetokenizeResult> DetokenizeIds(const LoadedModel& model, const std::vector<int32_t>& ids,
                                       bool skip_special_tokens) {
  if (!model.tokenizer) return NoTokenizer(model);
  return DetokenizeResult{model.tokenizer->Decode(ids, skip_special_tokens)};
}

Result<ApplyTemplateResult> ApplyTemplate(const LoadedModel& model,
                                          const GenerateParams& conversation,
                                          bool add_generation_prompt) {
  auto text = RenderChat(model, conversation, add_generation_prompt);
  if (!text.ok()) return std::move(text).error();
  ApplyTemplateResult out;
  out.prompt = std::move(*text);
  // As generate tokenizes it: the fallback template leaves the special
  // tokens (BOS) to the tokenizer.
  if (model.tokenizer) out.ids = model.tokenizer->Encode(out.prompt, !model.chat_template);
  return out;
}

CleanupInfo CleanUpMemory() {
  const auto t0 = std::chrono::steady_clock::now();
  CleanupInfo info;
  info.before = TakeMemorySnapshot();
  ReleaseCachedMemory();
  info.after = TakeMemorySnapshot();
  info.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

Result<bool> LoadAndWarmUp(Worker& worker, const ModelLocation& where) {
  auto model = AcquireModel(worker, where);
  if (!model.ok()) return std::move(model).error();
  // An embedding model was warmed up with an embed as it loaded.
  if ((*model)->kind() == ModelKind::kEmbedding) {
    ReleaseCachedMemory();
    return true;
  }
  const engine::ModelInfo& info = engine::Info(*(*model)->model);
  engine::GenerateRequest warm_up;
  warm_up.prompt = {info.bos_id.value_or(0)};
  warm_up.max_new_tokens = 1;
  auto warmed = engine::Generate(*(*model)->model, warm_up, [](int32_t) { return true; });
  if (!warmed.ok()) {
    return Error(warmed.error().code,
                 "warm-up generation on " + info.device + " failed: " + warmed.error().message);
  }
  ReleaseCachedMemory();
  return true;
}

std::vector<std::string> SweepIdle(Worker& worker, bool unload_idle, bool cleanup,
                                   std::chrono::steady_clock::duration keep_alive) {
  // A job may have started since the loop looked: then nothing is idle.
  if (worker.generations().busy()) return {};
  std::vector<std::string> unloaded;
  if (unload_idle) unloaded = worker.models().UnloadIdle(keep_alive);
  if (cleanup || !unloaded.empty()) ReleaseCachedMemory();
  return unloaded;
}

}  // namespace medq::daemon
