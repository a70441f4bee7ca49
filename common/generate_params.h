// The `generate` op's parameters, shared by the CLI (which builds them) and
// the daemon (which validates them). docs/protocol.md documents each field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/response_format.h"
#include "common/result.h"
#include "common/tool_calls.h"

namespace medq {

// How a text prompt reaches the model.
enum class PromptMode {
  kAuto,  // the chat template when the model has one, else the text as is
  kChat,  // the chat template (INVALID_REQUEST if the model has none)
  kRaw,   // the text as is, tokenized with the tokenizer's special tokens
};

struct GenerateParams {
  std::string model;    // name in the models directory or absolute path; "" = default
  std::string adapter;  // PEFT LoRA adapter (name or absolute path); "" = none

  // Exactly one of these three is the prompt.
  std::optional<std::string> prompt;
  std::optional<nlohmann::ordered_json> messages;  // [{"role","content"},...]
  std::optional<std::vector<int32_t>> prompt_ids;

  PromptMode mode = PromptMode::kAuto;  // for `prompt`
  std::string system;                   // system message when `prompt` goes through the template
  nlohmann::ordered_json template_kwargs = nullptr;  // extra chat-template variables
  nlohmann::ordered_json tools = nullptr;            // passed to the chat template

  // Most new tokens. Unset: kDefaultMaxTokens, or fewer when the model's
  // context leaves less room after the prompt; set: exactly this limit, and a
  // request whose prompt + max_tokens exceeds the context is refused.
  std::optional<int> max_tokens;
  float temperature = 0;  // 0: greedy
  int top_k = 0;
  float top_p = 1;
  float min_p = 0;
  float repeat_penalty = 1;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // stop strings, not included in the output

  std::string priority = "normal";        // "high", "normal" or "low"
  std::optional<double> queue_timeout_s;  // at most the daemon's queue_timeout_s
  // The request's deadline, queue wait plus generation, counted from its
  // acceptance (at most the daemon's request_timeout_s when that is set):
  // past it the job ends with TIMEOUT, keeping what it produced.
  std::optional<double> timeout_s;
  bool return_ids = false;  // token events also carry ids
  // Token events also carry each token's log-probability and those of the
  // `logprobs` most likely tokens at its position (0 to kMaxLogprobs).
  std::optional<int> logprobs;
  // Answers to give (1 to kMaxChoices), decoded side by side in one batch,
  // choice i seeded with seed + i; events then carry their choice's index.
  int n = 1;
  // The shape the output must take: text (the default), any JSON object, or
  // a document valid under a JSON Schema, enforced token by token.
  ResponseFormat response_format;
  // With `tools`: whether the model may, must or must not call them.
  // "required" and a named function are enforced by a grammar.
  ToolChoice tool_choice;
  // false: a "required" answer is exactly one call (else one or more).
  bool parallel_tool_calls = true;
};

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxLogprobs = 20;
inline constexpr int kMaxChoices = 8;
inline constexpr int kMaxNewTokensLimit = 1 << 20;
inline constexpr int kDefaultMaxTokens = 256;

// The max_tokens a request runs with, given the room the model's context
// leaves after the prompt (> 0): the request's own, or kDefaultMaxTokens
// capped by that room.
inline int64_t EffectiveMaxTokens(const GenerateParams& params, int64_t room) {
  if (params.max_tokens) return *params.max_tokens;
  return room < kDefaultMaxTokens ? room : kDefaultMaxTokens;
}

// Validates and reads `params` of a generate request. Unknown keys, wrong
// types and out-of-range values give INVALID_REQUEST naming the field.
Result<GenerateParams> ParseGenerateParams(const nlohmann::ordered_json& params);

// The JSON form ParseGenerateParams reads (defaults omitted), keys of
// messages, tools and template_kwargs in their order.
nlohmann::ordered_json ToJson(const GenerateParams& params);

}  // namespace medq
