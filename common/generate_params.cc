#include "common/generate_params.h"

#include <cmath>

#include "common/params.h"
#include "common/protocol.h"

namespace medq {
namespace {

Status ReadInt(const Params& p, const char* key, int64_t lo, int64_t hi, int& out) {
  auto it = p.find(key);
  if (it == p.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return InvalidParam(key, "must be an integer");
  int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return InvalidParam(key,
                        "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadFloat(const Params& p, const char* key, double lo, double hi, bool lo_open, float& out) {
  auto it = p.find(key);
  if (it == p.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return InvalidParam(key, "must be a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (lo_open && v == lo)) {
    std::string range = (lo_open ? "(" : "[") + Params(lo).dump() + ", " + Params(hi).dump() + "]";
    return InvalidParam(key, "must be in " + range);
  }
  out = static_cast<float>(v);
  return Status::Ok();
}

}  // namespace

Result<GenerateParams> ParseGenerateParams(const Params& p) {
  if (Status s = RejectUnknownFields(p, {"model",
                                         "adapter",
                                         "prompt",
                                         "messages",
                                         "prompt_ids",
                                         "mode",
                                         "system",
                                         "template_kwargs",
                                         "tools",
                                         "max_tokens",
                                         "temperature",
                                         "top_k",
                                         "top_p",
                                         "min_p",
                                         "repeat_penalty",
                                         "seed",
                                         "stop",
                                         "priority",
                                         "queue_timeout_s",
                                         "timeout_s",
                                         "return_ids",
                                         "logprobs",
                                         "n",
                                         "response_format",
                                         "tool_choice",
                                         "parallel_tool_calls"});
      !s.ok()) {
    return s.error();
  }
  GenerateParams g;
  Status s;
  if (!(s = ReadString(p, "model", g.model)).ok()) return s.error();
  if (!(s = ReadString(p, "adapter", g.adapter)).ok()) return s.error();
  if (!(s = ReadString(p, "system", g.system)).ok()) return s.error();
  if (!(s = ReadString(p, "priority", g.priority)).ok()) return s.error();
  if (g.priority != "high" && g.priority != "normal" && g.priority != "low") {
    return InvalidParam("priority", "must be \"high\", \"normal\" or \"low\"");
  }

  int prompts = 0;
  if (auto it = p.find("prompt"); it != p.end() && !it->is_null()) {
    if (!it->is_string()) return InvalidParam("prompt", "must be a string");
    if (it->get_ref<const std::string&>().empty())
      return InvalidParam("prompt", "must not be empty");
    g.prompt = it->get<std::string>();
    ++prompts;
  }
  if (auto it = p.find("messages"); it != p.end() && !it->is_null()) {
    if (!it->is_array() || it->empty())
      return InvalidParam("messages", "must be a non-empty array");
    for (const Params& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
        return InvalidParam("messages", "must hold objects with a string \"role\"");
      }
    }
    g.messages = *it;
    ++prompts;
  }
  if (auto it = p.find("prompt_ids"); it != p.end() && !it->is_null()) {
    if (!it->is_array() || it->empty())
      return InvalidParam("prompt_ids", "must be a non-empty array");
    std::vector<int32_t> ids;
    ids.reserve(it->size());
    for (const Params& id : *it) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return InvalidParam("prompt_ids", "must hold non-negative integer token ids");
      }
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    g.prompt_ids = std::move(ids);
    ++prompts;
  }
  if (prompts != 1) {
    return Error(ErrorCode::kInvalidRequest,
                 "exactly one of params.prompt, params.messages and params.prompt_ids is needed");
  }

  if (auto it = p.find("mode"); it != p.end() && !it->is_null()) {
    const std::string mode = it->is_string() ? it->get<std::string>() : "";
    if (mode == "auto")
      g.mode = PromptMode::kAuto;
    else if (mode == "chat")
      g.mode = PromptMode::kChat;
    else if (mode == "raw")
      g.mode = PromptMode::kRaw;
    else
      return InvalidParam("mode", "must be \"auto\", \"chat\" or \"raw\"");
  }
  if (auto it = p.find("template_kwargs"); it != p.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidParam("template_kwargs", "must be an object");
    g.template_kwargs = *it;
  }
  if (auto it = p.find("tools"); it != p.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidParam("tools", "must be an array");
    g.tools = *it;
  }

  if (auto it = p.find("max_tokens"); it != p.end() && !it->is_null()) {
    int max_tokens = 0;
    if (!(s = ReadInt(p, "max_tokens", 1, kMaxNewTokensLimit, max_tokens)).ok()) return s.error();
    g.max_tokens = max_tokens;
  }
  if (!(s = ReadFloat(p, "temperature", 0, 100, false, g.temperature)).ok()) return s.error();
  if (!(s = ReadInt(p, "top_k", 0, 1 << 24, g.top_k)).ok()) return s.error();
  if (!(s = ReadFloat(p, "top_p", 0, 1, true, g.top_p)).ok()) return s.error();
  if (!(s = ReadFloat(p, "min_p", 0, 1, false, g.min_p)).ok()) return s.error();
  if (!(s = ReadFloat(p, "repeat_penalty", 0, 100, true, g.repeat_penalty)).ok()) return s.error();
  if (auto it = p.find("seed"); it != p.end() && !it->is_null()) {
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return InvalidParam("seed", "must be a non-negative integer");
    }
    g.seed = it->get<uint64_t>();
  }
  if (auto it = p.find("stop"); it != p.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > kMaxStopStrings) {
      return InvalidParam(
          "stop", "must be an array of at most " + std::to_string(kMaxStopStrings) + " strings");
    }
    for (const Params& stop : *it) {
      if (!stop.is_string() || stop.get_ref<const std::string&>().empty()) {
        return InvalidParam("stop", "must hold non-empty strings");
      }
      g.stop.push_back(stop.get<std::string>());
    }
  }
  if (auto it = p.find("queue_timeout_s"); it != p.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return InvalidParam("queue_timeout_s", "must be a positive number");
    }
    g.queue_timeout_s = it->get<double>();
  }
  if (auto it = p.find("timeout_s"); it != p.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return InvalidParam("timeout_s", "must be a positive number");
    }
    g.timeout_s = it->get<double>();
  }
  if (auto it = p.find("return_ids"); it != p.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidParam("return_ids", "must be true or false");
    g.return_ids = it->get<bool>();
  }
  if (auto it = p.find("logprobs"); it != p.end() && !it->is_null()) {
    int logprobs = 0;
    if (!(s = ReadInt(p, "logprobs", 0, kMaxLogprobs, logprobs)).ok()) return s.error();
    g.logprobs = logprobs;
  }
  if (!(s = ReadInt(p, "n", 1, kMaxChoices, g.n)).ok()) return s.error();
  if (auto it = p.find("response_format"); it != p.end() && !it->is_null()) {
    auto format = ParseResponseFormat(*it, "params.response_format");
    if (!format.ok()) return std::move(format).error();
    g.response_format = std::move(format).value();
  }
  if (!(s = ReadBool(p, "parallel_tool_calls", g.parallel_tool_calls)).ok()) return s.error();
  if (auto it = p.find("tool_choice"); it != p.end() && !it->is_null()) {
    auto choice = ParseToolChoice(*it, g.tools, "params.tool_choice");
    if (!choice.ok()) return std::move(choice).error();
    g.tool_choice = std::move(choice).value();
    const bool forced = g.tool_choice.mode == ToolChoice::Mode::kRequired ||
                        g.tool_choice.mode == ToolChoice::Mode::kNamed;
    if (forced && g.response_format.constrained()) {
      return InvalidParam("tool_choice",
                          "forces a tool call, which response_format would contradict; send one");
    }
  }
  return g;
}

Params ToJson(const GenerateParams& g) {
  Params p = Params::object();
  if (!g.model.empty()) p["model"] = g.model;
  if (!g.adapter.empty()) p["adapter"] = g.adapter;
  if (g.prompt) p["prompt"] = *g.prompt;
  if (g.messages) p["messages"] = *g.messages;
  if (g.prompt_ids) p["prompt_ids"] = *g.prompt_ids;
  if (g.mode != PromptMode::kAuto) p["mode"] = g.mode == PromptMode::kChat ? "chat" : "raw";
  if (!g.system.empty()) p["system"] = g.system;
  if (!g.template_kwargs.is_null()) p["template_kwargs"] = g.template_kwargs;
  if (!g.tools.is_null()) p["tools"] = g.tools;
  if (g.response_format.constrained()) p["response_format"] = ToJson(g.response_format);
  if (g.tool_choice.mode != ToolChoice::Mode::kAuto) p["tool_choice"] = ToJson(g.tool_choice);
  if (!g.parallel_tool_calls) p["parallel_tool_calls"] = false;
  if (g.max_tokens) p["max_tokens"] = *g.max_tokens;
  if (g.temperature != 0) p["temperature"] = g.temperature;
  if (g.top_k != 0) p["top_k"] = g.top_k;
  if (g.top_p != 1) p["top_p"] = g.top_p;
  if (g.min_p != 0) p["min_p"] = g.min_p;
  if (g.repeat_penalty != 1) p["repeat_penalty"] = g.repeat_penalty;
  if (g.seed) p["seed"] = *g.seed;
  if (!g.stop.empty()) p["stop"] = g.stop;
  if (g.priority != "normal") p["priority"] = g.priority;
  if (g.queue_timeout_s) p["queue_timeout_s"] = *g.queue_timeout_s;
  if (g.timeout_s) p["timeout_s"] = *g.timeout_s;
  if (g.return_ids) p["return_ids"] = true;
  if (g.logprobs) p["logprobs"] = *g.logprobs;
  if (g.n != 1) p["n"] = g.n;
  return p;
}

}  // namespace medq
