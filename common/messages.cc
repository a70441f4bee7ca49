#include "common/messages.h"

#include <iterator>

namespace medq {

std::string FinishReasonName(FinishReason reason) {
  return nlohmann::json(reason).get<std::string>();
}

// As the other messages' macros write them, plus tool_calls and content only
// when the answer made calls: a done event without calls is unchanged.
void to_json(nlohmann::json& j, const GenerateDone& d) {
  j = {{"finish_reason", d.finish_reason},
       {"model", d.model},
       {"device", d.device},
       {"usage", d.usage},
       {"timings", d.timings}};
  if (!d.tool_calls.empty()) {
    j["tool_calls"] = d.tool_calls;
    j["content"] = d.content;
  }
  if (!d.choices.empty()) j["choices"] = d.choices;
}

void to_json(nlohmann::json& j, const ChoiceDone& c) {
  j = {{"index", c.index},
       {"finish_reason", c.finish_reason},
       {"completion_tokens", c.completion_tokens}};
  if (!c.tool_calls.empty()) {
    j["tool_calls"] = c.tool_calls;
    j["content"] = c.content;
  }
}

void from_json(const nlohmann::json& j, ChoiceDone& c) {
  c.index = j.value("index", 0);
  c.finish_reason = j.value("finish_reason", FinishReason::kStop);
  c.completion_tokens = j.value("completion_tokens", int64_t{0});
  c.tool_calls = j.value("tool_calls", std::vector<ToolCall>{});
  c.content = j.value("content", std::string());
}

void from_json(const nlohmann::json& j, GenerateDone& d) {
  const GenerateDone defaults;
  d.finish_reason = j.value("finish_reason", defaults.finish_reason);
  d.model = j.value("model", defaults.model);
  d.device = j.value("device", defaults.device);
  d.usage = j.value("usage", defaults.usage);
  d.timings = j.value("timings", defaults.timings);
  d.tool_calls = j.value("tool_calls", std::vector<ToolCall>{});
  d.content = j.value("content", std::string());
  d.choices = j.value("choices", std::vector<ChoiceDone>{});
}

void to_json(nlohmann::json& j, const TokenLogprob& t) {
  j = t.chosen;
  j["top_logprobs"] = t.top;
}

void from_json(const nlohmann::json& j, TokenLogprob& t) {
  t.chosen = j.get<TokenCandidate>();
  t.top = j.value("top_logprobs", std::vector<TokenCandidate>{});
}

void to_json(nlohmann::json& j, const TokenEvent& t) {
  j = {{"text", t.text}};
  if (!t.ids.empty()) j["ids"] = t.ids;
  if (!t.logprobs.empty()) j["logprobs"] = t.logprobs;
  if (t.index >= 0) j["index"] = t.index;
}

void from_json(const nlohmann::json& j, TokenEvent& t) {
  t.text = j.value("text", std::string());
  t.ids = j.value("ids", std::vector<int32_t>{});
  t.logprobs = j.value("logprobs", std::vector<TokenLogprob>{});
  t.index = j.value("index", -1);
}

std::string_view EventName(const GenerateEvent& event) {
  constexpr std::string_view kNames[] = {"queued", "started", "token"};
  static_assert(std::variant_size_v<GenerateEvent> == std::size(kNames));
  return kNames[event.index()];
}

nlohmann::json EventFields(const GenerateEvent& event) {
  return std::visit([](const auto& e) { return nlohmann::json(e); }, event);
}

std::optional<GenerateEvent> GenerateEventOf(const nlohmann::json& reply) {
  const auto it = reply.find("event");
  if (it == reply.end() || !it->is_string()) return std::nullopt;
  const std::string& name = it->get_ref<const std::string&>();
  if (name == "queued") return reply.get<QueuedEvent>();
  if (name == "started") return reply.get<StartedEvent>();
  if (name == "token") return reply.get<TokenEvent>();
  return std::nullopt;
}

}  // namespace medq
