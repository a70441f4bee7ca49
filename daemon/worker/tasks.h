// The worker-thread bodies of the model-class ops and of the daemon's own
// maintenance (loop/ops_models.cc, loop/ops.cc, server/server.cc queue them
// through the Scheduler): each runs on the worker thread, between two steps
// of the running generations, and returns its op's typed result. The loop
// only names them.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/generate_params.h"
#include "common/messages.h"
#include "common/result.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

class Worker;

// A model's folders, as the loop resolved them (loop/ops_internal.h).
struct ModelLocation {
  std::string name;
  std::filesystem::path dir;
  std::filesystem::path adapter_dir;  // empty: none
};

// The model at `where`, loaded when it is not (ModelStore::Acquire).
Result<LoadedModel*> AcquireModel(Worker& worker, const ModelLocation& where);

// load: what was loaded.
Result<LoadResult> DescribeLoad(const LoadedModel& model);
// unload: drops `name`, giving cached memory back when nothing generates;
// MODEL_NOT_FOUND when it was not loaded.
Result<UnloadResult> UnloadModel(Worker& worker, const std::string& name);
// tokenize, detokenize, apply-template, as docs/protocol.md says.
Result<TokenizeResult> TokenizeText(const LoadedModel& model, const std::string& text,
                                    bool add_special_tokens);
Result<DetokenizeResult> DetokenizeIds(const LoadedModel& model, const std::vector<int32_t>& ids,
                                       bool skip_special_tokens);
Result<ApplyTemplateResult> ApplyTemplate(const LoadedModel& model,
                                          const GenerateParams& conversation,
                                          bool add_generation_prompt);
// cleanup-memory: the memory before and after giving the caches back.
CleanupInfo CleanUpMemory();

// The preload's warm-up: `where` loaded and, for a generation model, one
// token generated (ready means "can generate now"); caches given back.
Result<bool> LoadAndWarmUp(Worker& worker, const ModelLocation& where);

// The idle sweep: unless a generation runs, unloads the models unused for
// `keep_alive` (when `unload_idle`) and gives cached memory back (when
// `cleanup`, or when one was unloaded). The names unloaded.
std::vector<std::string> SweepIdle(Worker& worker, bool unload_idle, bool cleanup,
                                   std::chrono::steady_clock::duration keep_alive);

}  // namespace medq::daemon
