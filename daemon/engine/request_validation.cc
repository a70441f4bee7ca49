#include "daemon/engine/request_validation.h"

#include <string>

#include "daemon/engine/sampling.h"

namespace medq::engine {

Status ValidateRequest(const Model& m, const GenerateRequest& r) {
  if (r.prompt.empty()) return InvalidRequest("the prompt is empty; give at least one token id");
  for (const int32_t id : r.prompt) {
    if (id < 0 || id >= m.config.vocab_size) {
      return InvalidRequest("prompt token id " + std::to_string(id) +
                            " is outside the vocabulary [0, " +
                            std::to_string(m.config.vocab_size) + ")");
    }
  }
  if (r.max_new_tokens < 0) return InvalidRequest("max_new_tokens must be >= 0");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
  if (total > m.info.max_context) {
    return InvalidRequest("prompt (" + std::to_string(r.prompt.size()) +
                          " tokens) + max_new_tokens (" + std::to_string(r.max_new_tokens) +
                          ") exceeds the model's context of " + std::to_string(m.info.max_context) +
                          " tokens; shorten the prompt or ask for fewer tokens");
  }
  if (r.top_logprobs < -1 || r.top_logprobs > kMaxTopLogprobs) {
    return InvalidRequest("top_logprobs must be -1 (none) or 0 to " +
                          std::to_string(kMaxTopLogprobs));
  }
  return ValidateSampling(r.sampling);
}

}  // namespace medq::engine
