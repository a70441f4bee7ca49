// One generation on the worker thread: model, prompt ids, the engine's token
// loop, detokenization and stop strings. Worker thread only.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/generate_params.h"
#include "common/result.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

struct GenerateSpec {
  GenerateParams params;
  std::string model_name;  // as the request named it (or the default)
  std::filesystem::path model_dir;
  std::filesystem::path adapter_dir;  // empty: none
};

// Called on the worker thread for each piece of stable text (with its ids
// when the request asked for them).
using EmitFn = std::function<void(std::string text, std::vector<int32_t> ids)>;

// Called on the worker thread once the prompt is checked, with its length in
// tokens and the run's effective max_tokens, before the engine takes any memory for the run: a
// failing status (INSUFFICIENT_MEMORY from the memory admission) ends the job with it.
using AdmitFn = std::function<Status(int64_t prompt_tokens, int64_t max_new_tokens)>;

// Runs the generation with `model` (already acquired; `load_ms` is what
// acquiring it took, reported in the timings). `cancel` is set by the loop thread (cancel op,
// client gone, shutdown); it is checked before each decode step. `heartbeat` is called once per
// step. Returns the `done` event's fields: finish_reason
// ("stop", "length" or "cancelled"), usage and timings (load, prefill,
// decode). Failure: INVALID_REQUEST for a prompt or parameter the model
// cannot take (the message names the field), `admit`'s error, or the engine's.
Result<nlohmann::json> RunGenerate(const LoadedModel& model, double load_ms,
                                   const GenerateParams& params, const std::atomic<bool>& cancel,
                                   const EmitFn& emit, const std::function<void()>& heartbeat,
                                   const AdmitFn& admit);

// The ids a request's prompt stands for with this model (tokenizer and chat
// template applied as the request's mode says).
Result<std::vector<int32_t>> PromptIds(const LoadedModel& model, const GenerateParams& params);

// The model's chat template rendered with the params' messages (or system
// and prompt), tools and template kwargs. INVALID_REQUEST when the model has
// no chat template, or the template fails (line and column in the message).
Result<std::string> RenderChat(const LoadedModel& model, const GenerateParams& params,
                               bool add_generation_prompt);

}  // namespace medq::daemon
