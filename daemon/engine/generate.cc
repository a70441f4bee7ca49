#include "daemon/engine/generate.h"

#include "daemon/engine/fault_injection.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/sampling.h"
#include "daemon/engine/transformer.h"

namespace medq::engine {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Status Validate(const Model& m, const GenerateRequest& r) {
  const auto bad = [](const std::string& what) { return Error(ErrorCode::kInvalidRequest, what); };
  if (r.prompt.empty()) return bad("the prompt is empty; give at least one token id");
  for (const int32_t id : r.prompt) {
    if (id < 0 || id >= m.config.vocab_size) {
      return bad("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                 std::to_string(m.config.vocab_size) + ")");
    }
  }
  if (r.max_new_tokens < 0) return bad("max_new_tokens must be >= 0");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
  if (total > m.info.max_context) {
    return bad("prompt (" + std::to_string(r.prompt.size()) + " tokens) + max_new_tokens (" +
               std::to_string(r.max_new_tokens) + ") exceeds the model's context of " +
               std::to_string(m.info.max_context) +
               " tokens; shorten the prompt or ask for fewer tokens");
  }
  return ValidateSampling(r.sampling);
}

}  // namespace

Result<GenerateResult> RunGeneration(const Model& m, const GenerateRequest& r,
                                     const std::function<bool(int32_t)>& on_token) {
  const Status valid = Validate(m, r);
  if (!valid.ok()) return valid.error();
  c10::InferenceMode inference_mode;
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(r.prompt.size());
  if (r.max_new_tokens == 0) return result;

  const std::vector<int32_t>& stop = r.stop_ids ? *r.stop_ids : m.info.eos_ids;
  Sampler sampler(r.sampling);
  std::vector<int32_t> history = r.prompt;
  history.reserve(r.prompt.size() + static_cast<size_t>(r.max_new_tokens));
  // Everything below is local: the cache and activations are freed on return,
  // whichever way the run ends (an exception included).
  KvCache cache(m, 1, static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens);

  const auto t_prefill = Clock::now();
  const std::vector<int64_t> prompt64(r.prompt.begin(), r.prompt.end());
  at::Tensor logits =
      Forward(m, at::tensor(prompt64, at::kLong).view({1, -1}), cache, LogitsFor::kLastPosition);
  int32_t next = sampler.Next(logits.view({-1}), history);
  result.prefill_ms = MsSince(t_prefill);

  const auto t_decode = Clock::now();
  // One reusable host tensor for the fed-back token.
  at::Tensor step_ids = at::empty({1, 1}, at::kLong);
  while (true) {
    history.push_back(next);
    ++result.new_tokens;
    const bool keep_going = on_token(next);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) {
      result.finish = FinishReason::kStop;
      break;
    }
    if (!keep_going) {
      result.finish = FinishReason::kCancelled;
      break;
    }
    if (result.new_tokens >= r.max_new_tokens) {
      result.finish = FinishReason::kLength;
      break;
    }
    step_ids.fill_(static_cast<int64_t>(next));
    FailIfArmed(Fault::kDecodeOom);
    logits = Forward(m, step_ids, cache, LogitsFor::kLastPosition);
    next = sampler.Next(logits.view({-1}), history);
  }
  result.decode_ms = MsSince(t_decode);
  return result;
}

}  // namespace medq::engine
