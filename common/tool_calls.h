// Tool calls (OpenAI's function calling) in medq's one vocabulary: the
// request's tool_choice, the calls a generation ends with, and the two ways
// they are read from a model's text. docs/protocol.md documents each.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/response_format.h"
#include "common/result.h"

namespace medq {

// One call, as OpenAI returns it:
// {"id","type":"function","function":{"name","arguments"}}, where
// `arguments` is the JSON text of the arguments object.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};
void to_json(nlohmann::json& j, const ToolCall& call);
void from_json(const nlohmann::json& j, ToolCall& call);

struct ToolChoice {
  enum class Mode {
    kAuto,      // the model decides; its tool-call syntax is read from the text
    kNone,      // no calls are read
    kRequired,  // the answer is one or more calls (enforced by a grammar)
    kNamed,     // the answer is a call of `name` (enforced by a grammar)
  };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed
};

// Reads tool_choice ("auto", "none", "required" or
// {"type":"function","function":{"name":..}}) against `tools` (OpenAI's
// [{"type":"function","function":{"name","description","parameters"}}]):
// a forced choice needs tools, a named one a tool of that name.
// INVALID_REQUEST naming `field`.
Result<ToolChoice> ParseToolChoice(const nlohmann::ordered_json& value,
                                   const nlohmann::ordered_json& tools, const std::string& field);
nlohmann::ordered_json ToJson(const ToolChoice& choice);

// The response format that makes a forced choice's answer a call: for a
// named tool, its parameters object; for "required", an array of one or more
// (exactly one without `parallel`, at most kMaxParallelCalls with it)
// {"name": <a tool's name>, "parameters": <its parameters>}. The tools'
// parameter schemas must use only the keywords structured output enforces
// (INVALID_REQUEST naming `field`[i].function.parameters and the keyword).
inline constexpr int kMaxParallelCalls = 8;
Result<ResponseFormat> ForcedCallFormat(const nlohmann::ordered_json& tools,
                                        const ToolChoice& choice, bool parallel,
                                        const std::string& field);

// The calls of a forced choice's answer (a document the grammar of
// ForcedCallFormat produced), ids "call_<id_prefix>_<i>"; empty when the
// text is not a complete document (a run cut by max_tokens). Items that
// name no tool of `tools` are left out (the grammar allows none).
std::vector<ToolCall> ForcedCalls(std::string_view text, const ToolChoice& choice,
                                  const nlohmann::ordered_json& tools,
                                  const std::string& id_prefix);

// A turn of free text read for tool calls in the syntaxes of the common
// chat templates: <tool_call>{"name","arguments"}</tool_call> blocks (Qwen
// 2.5 and 3, Hermes), or a text that is one JSON call or an array of them,
// {"name", "arguments" | "parameters"} (Llama 3.1-3.3 after <|python_tag|>,
// Mistral after [TOOL_CALLS], both special tokens that decoding leaves out).
// Only names of `tools` count as calls. `content` is the text outside them.
struct ParsedTurn {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedTurn ParseToolCalls(std::string_view text, const nlohmann::ordered_json& tools,
                          const std::string& id_prefix);

// How many bytes at the start of a turn's text so far (`text`, which only
// grows) are content whatever follows, so that a stream may send them before
// the turn ends: none while the turn may be one JSON call or an array of
// them (its first non-space character is '{' or '[', or it starts like
// <|python_tag|>), else the text before the first <tool_call> (or before an
// ending that could begin one), less trailing whitespace (which ParseToolCalls
// trims from a content beside calls). Never shrinks as `text` grows, and
// ends on a character boundary of valid UTF-8. What it leaves may still be
// content: ParseToolCalls on the whole turn says.
size_t ToolCallSafePrefix(std::string_view text);

}  // namespace medq
