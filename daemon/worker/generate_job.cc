#include "daemon/worker/generate_job.h"

#include <chrono>

#include "daemon/worker/stop_strings.h"
#include "daemon/tokenizer/incremental_decoder.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

Error Invalid(const std::string& msg) {
  return Error(ErrorCode::kInvalidRequest, msg);
}

}  // namespace

Result<std::string> RenderChat(const LoadedModel& model, const GenerateParams& p,
                               bool add_generation_prompt) {
  if (!model.chat_template) {
    return Invalid("model " + model.name +
                   " has no chat template (tokenizer_config.json chat_template); send the "
                   "prompt with mode \"raw\"");
  }
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
  return model.chat_template->Render(in);
}

Result<std::vector<int32_t>> PromptIds(const LoadedModel& model, const GenerateParams& p) {
  if (p.prompt_ids) return *p.prompt_ids;
  if (!model.tokenizer) {
    return Invalid("model " + model.name + " has no tokenizer.json; send params.prompt_ids");
  }
  const bool chat = p.messages || p.mode == PromptMode::kChat ||
                    (p.mode == PromptMode::kAuto && model.chat_template.has_value());
  if (!chat) return model.tokenizer->Encode(*p.prompt, /*add_special_tokens=*/true);
  auto text = RenderChat(model, p, /*add_generation_prompt=*/true);
  if (!text.ok()) return std::move(text).error();
  // The template writes the special tokens (BOS) itself.
  return model.tokenizer->Encode(*text, /*add_special_tokens=*/false);
}

Result<json> RunGenerate(const LoadedModel& model, double load_ms, const GenerateParams& p,
                         const std::atomic<bool>& cancel, const EmitFn& emit,
                         const std::function<void()>& heartbeat, const AdmitFn& admit) {
  const engine::ModelInfo& info = engine::Info(*model.model);

  auto ids = PromptIds(model, p);
  if (!ids.ok()) return std::move(ids).error();
  if (ids->empty()) return Invalid("params.prompt gives no tokens");
  const int64_t prompt_len = static_cast<int64_t>(ids->size());
  if (prompt_len >= info.max_context) {
    return Invalid("params.prompt is " + std::to_string(prompt_len) +
                   " tokens; the model's context is " + std::to_string(info.max_context));
  }
  const int64_t max_new = EffectiveMaxTokens(p, info.max_context - prompt_len);
  if (prompt_len + max_new > info.max_context) {
    return Invalid("params.max_tokens " + std::to_string(max_new) + " with a prompt of " +
                   std::to_string(prompt_len) + " tokens exceeds the model's context of " +
                   std::to_string(info.max_context) + "; ask for at most " +
                   std::to_string(info.max_context - prompt_len));
  }
  for (int32_t id : *ids) {
    if (id < 0 || id >= info.vocab_size) {
      return Invalid("params.prompt_ids holds id " + std::to_string(id) +
                     ", outside the model's vocabulary of " + std::to_string(info.vocab_size));
    }
  }

  if (Status st = admit(prompt_len, max_new); !st.ok()) return st.error();

  engine::GenerateRequest req;
  req.prompt = std::move(*ids);
  req.max_new_tokens = static_cast<int>(max_new);
  req.sampling = {p.temperature, p.top_k, p.top_p, p.min_p, p.repeat_penalty, p.seed};

  std::optional<tokenizer::IncrementalDecoder> decoder;
  if (model.tokenizer) decoder.emplace(*model.tokenizer, /*skip_special_tokens=*/true);
  StopStrings stops(p.stop);
  std::vector<int32_t> pending_ids;
  std::vector<int32_t> eos = info.eos_ids;
  auto on_token = [&](int32_t id) {
    heartbeat();
    const bool is_eos = std::find(eos.begin(), eos.end(), id) != eos.end();
    if (p.return_ids) pending_ids.push_back(id);
    std::string text = decoder && !is_eos ? decoder->Push(id) : std::string();
    text = stops.Push(text);
    if (!text.empty() || (!pending_ids.empty() && !is_eos)) {
      emit(std::move(text), std::exchange(pending_ids, {}));
    }
    return !stops.stopped() && !cancel.load();
  };
  auto result = engine::Generate(*model.model, req, on_token);
  if (!result.ok()) return std::move(result).error();

  std::string tail = decoder ? stops.Push(decoder->Finish()) : std::string();
  tail += stops.Finish();
  if (!tail.empty() || !pending_ids.empty()) emit(std::move(tail), std::exchange(pending_ids, {}));

  std::string finish = "length";
  if (result->finish == engine::FinishReason::kStop || stops.stopped())
    finish = "stop";
  else if (result->finish == engine::FinishReason::kCancelled)
    finish = "cancelled";

  return json{
      {"finish_reason", finish},
      {"model", model.name},
      {"device", info.device},
      {"usage",
       {{"prompt_tokens", result->prompt_tokens}, {"completion_tokens", result->new_tokens}}},
      {"timings",
       {{"load_ms", load_ms},
        {"prefill_ms", result->prefill_ms},
        {"decode_ms", result->decode_ms}}}};
}

}  // namespace medq::daemon
