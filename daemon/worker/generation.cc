#include "daemon/worker/generation.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "daemon/template/fallback_template.h"
#include "daemon/tokenizer/utf8.h"

namespace medq::daemon {
namespace {

// Patient text for the log (only with log_prompts), JSON-quoted so that
// newlines and control characters in it cannot forge log lines.
std::string QuotedForLog(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string PromptForLog(const GenerateParams& p) {
  nlohmann::ordered_json prompt;
  if (!p.system.empty()) prompt["system"] = p.system;
  if (p.prompt) prompt["prompt"] = *p.prompt;
  if (p.messages) prompt["messages"] = *p.messages;
  if (p.prompt_ids) prompt["prompt_ids"] = *p.prompt_ids;
  return QuotedForLog(prompt);
}

// The request's stop strings, and the fallback template's when it renders
// the prompt (a model without a chat template of its own).
std::vector<std::string> StopsFor(const LoadedModel& model, const GenerateParams& p) {
  std::vector<std::string> stops = p.stop;
  if (!model.chat_template && IsChat(model, p)) {
    stops.insert(stops.end(), chat::kFallbackChatStops.begin(), chat::kFallbackChatStops.end());
  }
  return stops;
}

// The request's structured output as a constraint for the engine (null for
// text), compiling the model's vocabulary for the grammar engine once.
bool Forced(const ToolChoice& c) {
  return c.mode == ToolChoice::Mode::kRequired || c.mode == ToolChoice::Mode::kNamed;
}

// The response format the engine enforces: the request's, or for a forced
// tool choice the shape of its calls.
Result<ResponseFormat> EnforcedFormat(const GenerateParams& p) {
  if (Forced(p.tool_choice))
    return ForcedCallFormat(p.tools, p.tool_choice, p.parallel_tool_calls, "params.tools");
  return p.response_format;
}

Result<std::shared_ptr<engine::TokenConstraint>> ConstraintFor(const LoadedModel& model,
                                                               const GenerateParams& p) {
  auto format = EnforcedFormat(p);
  if (!format.ok()) return std::move(format).error();
  if (!format->constrained()) return std::shared_ptr<engine::TokenConstraint>();
  if (!model.tokenizer) {
    return InvalidRequest("params.response_format needs the model's tokenizer.json (model " +
                          model.name + " has none)");
  }
  if (!model.structured) {
    const engine::ModelInfo& info = engine::Info(*model.model);
    auto made = grammar::StructuredOutput::Create(*model.tokenizer, info.vocab_size, info.eos_ids);
    if (!made.ok()) return std::move(made).error();
    model.structured = std::move(made).value();
  }
  return model.structured->Constrain(*format);
}

}  // namespace

bool ReadsToolCalls(const GenerateParams& p) {
  return p.tools.is_array() && !p.tools.empty() && p.tool_choice.mode != ToolChoice::Mode::kNone;
}

bool IsChat(const LoadedModel& model, const GenerateParams& p) {
  if (p.prompt_ids) return false;
  return p.messages || p.mode == PromptMode::kChat ||
         (p.mode == PromptMode::kAuto && model.chat_template.has_value());
}

Result<std::string> RenderChat(const LoadedModel& model, const GenerateParams& p,
                               bool add_generation_prompt) {
  chat::TemplateInputs in;
  if (p.messages) {
    in.messages = *p.messages;
  } else {
    if (!p.system.empty()) in.messages.push_back({{"role", "system"}, {"content", p.system}});
    in.messages.push_back({{"role", "user"}, {"content", *p.prompt}});
  }
  in.add_generation_prompt = add_generation_prompt;
  in.tools = p.tools;
  in.extra = p.template_kwargs;
  return model.chat_template ? model.chat_template->Render(in)
                             : chat::FallbackChatTemplate().Render(in);
}

Result<std::vector<int32_t>> PromptIds(const LoadedModel& model, const GenerateParams& p) {
  if (p.prompt_ids) return *p.prompt_ids;
  if (!model.tokenizer) {
    return InvalidRequest("model " + model.name + " has no tokenizer.json; send params.prompt_ids");
  }
  if (!IsChat(model, p)) return model.tokenizer->Encode(*p.prompt, /*add_special_tokens=*/true);
  auto text = RenderChat(model, p, /*add_generation_prompt=*/true);
  if (!text.ok()) return std::move(text).error();
  // A model's own template writes the special tokens (BOS) itself; the
  // fallback leaves them to the tokenizer, as a raw prompt does.
  return model.tokenizer->Encode(*text, /*add_special_tokens=*/!model.chat_template);
}

Generation::Generation(GenerationJob job, const LoadedModel& model, double load_ms)
    : job_(std::move(job)),
      model_(model.model),
      tokenizer_(model.tokenizer),
      model_name_(model.name),
      load_ms_(load_ms),
      stops_(StopsFor(model, job_.spec->params)),
      keeps_output_(job_.log_text || ReadsToolCalls(job_.spec->params)) {
  if (tokenizer_) decoder_.emplace(*tokenizer_, /*skip_special_tokens=*/true);
}

Result<std::unique_ptr<Generation>> Generation::Prepare(GenerationJob job, const LoadedModel& model,
                                                        double load_ms) {
  const engine::ModelInfo& info = engine::Info(*model.model);
  const GenerateParams& p = job.spec->params;
  auto ids = PromptIds(model, p);
  if (!ids.ok()) return std::move(ids).error();
  if (ids->empty()) return InvalidRequest("params.prompt gives no tokens");
  const int64_t prompt_len = static_cast<int64_t>(ids->size());
  if (prompt_len >= info.max_context) {
    return InvalidRequest("params.prompt is " + std::to_string(prompt_len) +
                          " tokens; the model's context is " + std::to_string(info.max_context));
  }
  const int64_t max_new = EffectiveMaxTokens(p, info.max_context - prompt_len);
  if (prompt_len + max_new > info.max_context) {
    return InvalidRequest("params.max_tokens " + std::to_string(max_new) + " with a prompt of " +
                          std::to_string(prompt_len) + " tokens exceeds the model's context of " +
                          std::to_string(info.max_context) + "; ask for at most " +
                          std::to_string(info.max_context - prompt_len));
  }
  for (int32_t id : *ids) {
    if (id < 0 || id >= info.vocab_size) {
      return InvalidRequest("params.prompt_ids holds id " + std::to_string(id) +
                            ", outside the model's vocabulary of " +
                            std::to_string(info.vocab_size));
    }
  }
  auto constraint = ConstraintFor(model, p);
  if (!constraint.ok()) return std::move(constraint).error();
  if (job.log_text && job.choice == 0) spdlog::info("job {}: prompt {}", job.id, PromptForLog(p));
  std::unique_ptr<Generation> g(new Generation(std::move(job), model, load_ms));
  g->request_.constraint = std::move(constraint).value();
  g->request_.prompt = std::move(*ids);
  g->request_.max_new_tokens = static_cast<int>(max_new);
  const std::optional<uint64_t> seed =
      p.seed ? std::optional<uint64_t>(*p.seed + static_cast<uint64_t>(g->job_.choice))
             : std::nullopt;
  g->request_.sampling = {p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, seed};
  g->request_.top_logprobs = p.logprobs.value_or(-1);
  return g;
}

MemoryEstimate Generation::Estimate() const {
  return EstimateRunMemory(info(), static_cast<int64_t>(request_.prompt.size()),
                           request_.max_new_tokens);
}

void Generation::Emit(std::string text) {
  if (keeps_output_) output_ += text;
  TokenEvent event;
  event.text = std::move(text);
  event.ids = std::exchange(pending_ids_, {});
  event.logprobs = std::exchange(pending_logprobs_, {});
  job_.sink.token(std::move(event));
}

TokenCandidate Generation::Candidate(int32_t id, float logprob) const {
  TokenCandidate c;
  c.id = id;
  c.logprob = std::isfinite(logprob) ? std::max<double>(logprob, kMinLogprob) : kMinLogprob;
  if (tokenizer_) {
    const std::string bytes = tokenizer_->TokenBytes(id).value_or(std::string());
    c.bytes.assign(bytes.begin(), bytes.end());
    c.token = tokenizer::SanitizeUtf8(bytes);
  }
  return c;
}

bool Generation::OnToken(int32_t id, const std::optional<engine::TokenLogprobs>& logprobs) {
  const std::vector<int32_t>& eos = info().eos_ids;
  const bool is_eos = std::find(eos.begin(), eos.end(), id) != eos.end();
  if (job_.spec->params.return_ids) pending_ids_.push_back(id);
  if (logprobs && !is_eos) {
    TokenLogprob entry;
    entry.chosen = Candidate(id, logprobs->logprob);
    for (const auto& [alt, lp] : logprobs->top)
      entry.top.push_back(Candidate(alt, lp));
    pending_logprobs_.push_back(std::move(entry));
  }
  std::string text = decoder_ && !is_eos ? decoder_->Push(id) : std::string();
  text = stops_.Push(text);
  if (!text.empty() || ((!pending_ids_.empty() || !pending_logprobs_.empty()) && !is_eos)) {
    Emit(std::move(text));
  }
  return !stops_.stopped();
}

GenerateDone Generation::Finish(const engine::GenerateResult& r) {
  std::string tail = decoder_ ? stops_.Push(decoder_->Finish()) : std::string();
  tail += stops_.Finish();
  if (!tail.empty() || !pending_ids_.empty() || !pending_logprobs_.empty()) Emit(std::move(tail));
  if (job_.log_text) spdlog::info("job {}: output {}", job_.id, QuotedForLog(output_));

  GenerateDone done;
  done.finish_reason = FinishReason::kLength;
  if (r.finish == engine::FinishReason::kStop || stops_.stopped()) {
    done.finish_reason = FinishReason::kStop;
  } else if (r.finish == engine::FinishReason::kCancelled) {
    done.finish_reason = FinishReason::kCancelled;
  }
  const GenerateParams& p = job_.spec->params;
  if (ReadsToolCalls(p) && done.finish_reason == FinishReason::kStop) {
    // A forced choice's answer is its calls (the grammar's document); a
    // free one is read in the model's tool-call syntax.
    if (Forced(p.tool_choice)) {
      done.tool_calls = ForcedCalls(output_, p.tool_choice, p.tools, job_.id);
    } else {
      ParsedTurn turn = ParseToolCalls(output_, p.tools, job_.id);
      done.tool_calls = std::move(turn.calls);
      done.content = std::move(turn.content);
    }
    if (!done.tool_calls.empty()) done.finish_reason = FinishReason::kToolCalls;
  }
  done.model = model_name_;
  done.device = info().device;
  done.usage.prompt_tokens = r.prompt_tokens;
  done.usage.completion_tokens = r.new_tokens;
  done.timings.load_ms = load_ms_;
  done.timings.prefill_ms = r.prefill_ms;
  done.timings.decode_ms = r.decode_ms;
  return done;
}

}  // namespace medq::daemon
