// A model's answer read for tool calls (common/tool_calls.h): the input is
// the answer's text. Whatever it holds, every call read names a tool of the
// request and its arguments are JSON text, and a forced choice's calls are
// too.
#include <string>

#include "common/tool_calls.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using medq::fuzz::Fail;

const nlohmann::ordered_json& Tools() {
  static const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "now"}}])");
  return tools;
}

void CheckCalls(const std::vector<medq::ToolCall>& calls, bool named_only) {
  for (const auto& call : calls) {
    if (call.name != "get_weather" && call.name != "now") Fail("a call names no tool");
    if (named_only && call.name != "get_weather") Fail("a named choice's call names another");
    if (!nlohmann::json::accept(call.arguments)) Fail("a call's arguments are not JSON");
    if (call.id.rfind("call_j1_", 0) != 0) Fail("a call's id is not call_<job>_<i>");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(medq::fuzz::AsText(data, size));
  const medq::ParsedTurn turn = medq::ParseToolCalls(text, Tools(), "j1");
  CheckCalls(turn.calls, false);
  if (turn.calls.empty() && turn.content != text) Fail("a turn without calls lost its text");
  CheckCalls(medq::ForcedCalls(text, {medq::ToolChoice::Mode::kRequired, ""}, Tools(), "j1"),
             false);
  CheckCalls(
      medq::ForcedCalls(text, {medq::ToolChoice::Mode::kNamed, "get_weather"}, Tools(), "j1"),
      true);
  return 0;
}
