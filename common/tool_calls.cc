#include "common/tool_calls.h"

#include <algorithm>
#include <optional>

#include "common/error.h"
#include "common/protocol.h"

namespace medq {
namespace {

using Json = nlohmann::ordered_json;

// The function object of tools[i], or null when it is not one.
const Json* FunctionOf(const Json& tool) {
  if (!tool.is_object() || tool.value("type", "") != "function") return nullptr;
  const auto f = tool.find("function");
  if (f == tool.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
    return nullptr;
  }
  return &*f;
}

bool IsToolName(const Json& tools, std::string_view name) {
  if (!tools.is_array()) return false;
  return std::any_of(tools.begin(), tools.end(), [&](const Json& t) {
    const Json* f = FunctionOf(t);
    return f != nullptr && (*f)["name"].get_ref<const std::string&>() == name;
  });
}

// A function's parameters schema (an object taking anything when absent).
Json ParametersOf(const Json& function) {
  const auto p = function.find("parameters");
  if (p == function.end() || p->is_null()) return {{"type", "object"}};
  return *p;
}

std::string CallId(const std::string& prefix, size_t i) {
  return "call_" + prefix + "_" + std::to_string(i);
}

// {"name", "arguments" | "parameters"} naming one of `tools`, as a call.
std::optional<ToolCall> CallOf(const Json& j, const Json& tools) {
  if (!j.is_object()) return std::nullopt;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || !IsToolName(tools, name->get<std::string>())) {
    return std::nullopt;
  }
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ToolCall call;
  call.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    // Already JSON text (Mistral's form): a call only when it is JSON.
    call.arguments = args->get<std::string>();
    if (!nlohmann::json::accept(call.arguments)) return std::nullopt;
  } else {
    call.arguments = args->dump();
  }
  return call;
}

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// A model's text as JSON, parsed as a client's request is (depth-bounded,
// protocol.h): an answer of 10^6 '[' must not reach anything recursive.
// Discarded when it is not JSON or nests too deep.
Json ParseOrDiscard(std::string_view text) {
  BoundedJson parsed = ParseBoundedJson(text);
  if (parsed.fault != BoundedJson::Fault::kNone || parsed.too_deep) {
    return Json(Json::value_t::discarded);
  }
  return std::move(parsed.value);
}

}  // namespace

void to_json(nlohmann::json& j, const ToolCall& call) {
  j = {{"id", call.id},
       {"type", "function"},
       {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

void from_json(const nlohmann::json& j, ToolCall& call) {
  call.id = j.value("id", "");
  const nlohmann::json f = j.value("function", nlohmann::json::object());
  call.name = f.value("name", "");
  call.arguments = f.value("arguments", "");
}

Result<ToolChoice> ParseToolChoice(const Json& value, const Json& tools, const std::string& field) {
  ToolChoice c;
  const bool has_tools = tools.is_array() && !tools.empty();
  if (value.is_string()) {
    const std::string& mode = value.get_ref<const std::string&>();
    if (mode == "auto") return c;
    if (mode == "none") {
      c.mode = ToolChoice::Mode::kNone;
      return c;
    }
    if (mode != "required") {
      return InvalidAt(field, "must be \"auto\", \"none\", \"required\" or a named function");
    }
    if (!has_tools) return InvalidAt(field, "is \"required\" but no tools are given");
    c.mode = ToolChoice::Mode::kRequired;
    return c;
  }
  if (!value.is_object() || value.value("type", "") != "function" || !value.contains("function") ||
      !value["function"].is_object() || !value["function"].contains("name") ||
      !value["function"]["name"].is_string()) {
    return InvalidAt(field,
                     "must be \"auto\", \"none\", \"required\" or "
                     "{\"type\":\"function\",\"function\":{\"name\":...}}");
  }
  c.mode = ToolChoice::Mode::kNamed;
  c.name = value["function"]["name"].get<std::string>();
  if (!IsToolName(tools, c.name)) {
    return InvalidAt(field + ".function.name",
                     "names no tool of the request (\"" + Echo(c.name) + "\")");
  }
  return c;
}

Json ToJson(const ToolChoice& c) {
  switch (c.mode) {
    case ToolChoice::Mode::kAuto:
      return "auto";
    case ToolChoice::Mode::kNone:
      return "none";
    case ToolChoice::Mode::kRequired:
      return "required";
    case ToolChoice::Mode::kNamed:
      break;
  }
  return {{"type", "function"}, {"function", {{"name", c.name}}}};
}

Result<ResponseFormat> ForcedCallFormat(const Json& tools, const ToolChoice& choice, bool parallel,
                                        const std::string& field) {
  ResponseFormat f;
  f.type = ResponseFormat::Type::kJsonSchema;
  f.strict = true;
  Json alternatives = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json* function = FunctionOf(tools[i]);
    const std::string where = field + "[" + std::to_string(i) + "]";
    if (function == nullptr) {
      return InvalidAt(where, "must be {\"type\":\"function\",\"function\":{\"name\":...}}");
    }
    const std::string& name = (*function)["name"].get_ref<const std::string&>();
    if (choice.mode == ToolChoice::Mode::kNamed && name != choice.name) continue;
    const Json parameters = ParametersOf(*function);
    if (Status s = CheckSupportedSchema(parameters, where + ".function.parameters"); !s.ok()) {
      return s.error();
    }
    if (choice.mode == ToolChoice::Mode::kNamed) {
      f.name = name;
      f.schema = parameters;
      return f;
    }
    alternatives.push_back(
        {{"type", "object"},
         {"properties", {{"name", {{"const", name}}}, {"parameters", parameters}}},
         {"required", {"name", "parameters"}},
         {"additionalProperties", false}});
  }
  if (alternatives.empty()) return InvalidAt(field, "holds no function to call");
  f.name = "tool_calls";
  f.schema = {{"type", "array"},
              {"minItems", 1},
              {"maxItems", parallel ? kMaxParallelCalls : 1},
              {"items", {{"anyOf", alternatives}}}};
  return f;
}

std::vector<ToolCall> ForcedCalls(std::string_view text, const ToolChoice& choice,
                                  const Json& tools, const std::string& id_prefix) {
  const Json doc = ParseOrDiscard(text);
  std::vector<ToolCall> calls;
  if (doc.is_discarded()) return calls;
  if (choice.mode == ToolChoice::Mode::kNamed) {
    calls.push_back({CallId(id_prefix, 0), choice.name, doc.dump()});
    return calls;
  }
  if (!doc.is_array()) return calls;
  for (const Json& item : doc) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
        !IsToolName(tools, item["name"].get<std::string>())) {
      continue;
    }
    calls.push_back({CallId(id_prefix, calls.size()), item["name"].get<std::string>(),
                     item.value("parameters", Json::object()).dump()});
  }
  return calls;
}

ParsedTurn ParseToolCalls(std::string_view text, const Json& tools, const std::string& id_prefix) {
  ParsedTurn turn;
  constexpr std::string_view kOpen = "<tool_call>";
  constexpr std::string_view kClose = "</tool_call>";
  // <tool_call> blocks, anywhere in the turn.
  if (text.find(kOpen) != std::string_view::npos) {
    std::string content;
    size_t at = 0;
    while (at < text.size()) {
      const size_t open = text.find(kOpen, at);
      if (open == std::string_view::npos) break;
      const size_t body = open + kOpen.size();
      size_t close = text.find(kClose, body);
      const size_t end = close == std::string_view::npos ? text.size() : close + kClose.size();
      if (close == std::string_view::npos) close = text.size();
      const auto call = CallOf(ParseOrDiscard(Trim(text.substr(body, close - body))), tools);
      if (!call) break;  // not a call: the rest stays text
      content.append(text.substr(at, open - at));
      turn.calls.push_back(*call);
      turn.calls.back().id = CallId(id_prefix, turn.calls.size() - 1);
      at = end;
    }
    if (!turn.calls.empty()) {
      content.append(text.substr(at));
      turn.content = std::string(Trim(content));
      return turn;
    }
  }
  // The whole turn as one call or an array of calls.
  std::string_view body = Trim(text);
  for (std::string_view marker : {"[TOOL_CALLS]", "<|python_tag|>"}) {
    if (body.substr(0, marker.size()) == marker) body = Trim(body.substr(marker.size()));
  }
  const Json doc = ParseOrDiscard(body);
  std::vector<ToolCall> calls;
  if (doc.is_object()) {
    if (auto call = CallOf(doc, tools)) calls.push_back(*call);
  } else if (doc.is_array() && !doc.empty()) {
    for (const Json& item : doc) {
      auto call = CallOf(item, tools);
      if (!call) {
        calls.clear();
        break;
      }
      calls.push_back(*call);
    }
  }
  if (calls.empty()) {
    turn.content = std::string(text);
    return turn;
  }
  for (size_t i = 0; i < calls.size(); ++i)
    calls[i].id = CallId(id_prefix, i);
  turn.calls = std::move(calls);
  return turn;
}

size_t ToolCallSafePrefix(std::string_view text) {
  constexpr std::string_view kOpen = "<tool_call>";
  constexpr std::string_view kPythonTag = "<|python_tag|>";
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return 0;
  const std::string_view rest = text.substr(first);
  if (rest.front() == '{' || rest.front() == '[') return 0;
  if (rest.substr(0, kPythonTag.size()) == kPythonTag.substr(0, rest.size())) return 0;
  size_t limit = text.find(kOpen);
  if (limit == std::string_view::npos) {
    // An ending that could grow into the marker is held back.
    limit = text.size();
    for (size_t n = std::min(text.size(), kOpen.size() - 1); n > 0; --n) {
      if (text.substr(text.size() - n) == kOpen.substr(0, n)) {
        limit = text.size() - n;
        break;
      }
    }
  }
  while (limit > 0 && std::string_view(" \t\r\n").find(text[limit - 1]) != std::string_view::npos)
    --limit;
  return limit;
}

}  // namespace medq
