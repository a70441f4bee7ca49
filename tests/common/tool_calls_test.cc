// Tool calls: tool_choice checked against the tools, the grammar's format
// for a forced choice, and calls read back from the syntaxes of the common
// chat templates (Qwen/Hermes <tool_call>, Llama 3.1 JSON, Mistral arrays).
#include <catch2/catch.hpp>

#include "common/generate_params.h"
#include "common/messages.h"
#include "common/tool_calls.h"

using medq::ForcedCallFormat;
using medq::ForcedCalls;
using medq::ParseToolCalls;
using medq::ParseToolChoice;
using medq::ToolChoice;
using Json = nlohmann::ordered_json;

namespace {

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "weather",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "now"}}
  ])");
}

}  // namespace

TEST_CASE("tool_choice is read against the tools", "[common][tool_calls]") {
  CHECK(ParseToolChoice("auto", Tools(), "tool_choice")->mode == ToolChoice::Mode::kAuto);
  CHECK(ParseToolChoice("none", Json(), "tool_choice")->mode == ToolChoice::Mode::kNone);
  CHECK(ParseToolChoice("required", Tools(), "tool_choice")->mode == ToolChoice::Mode::kRequired);
  auto named = ParseToolChoice({{"type", "function"}, {"function", {{"name", "now"}}}}, Tools(),
                               "tool_choice");
  REQUIRE(named.ok());
  CHECK(named->mode == ToolChoice::Mode::kNamed);
  CHECK(named->name == "now");
  CHECK(medq::ToJson(*named) == Json({{"type", "function"}, {"function", {{"name", "now"}}}}));

  CHECK_FALSE(ParseToolChoice("required", Json::array(), "tool_choice").ok());
  CHECK_FALSE(ParseToolChoice("always", Tools(), "tool_choice").ok());
  CHECK_FALSE(ParseToolChoice(3, Tools(), "tool_choice").ok());
  auto unknown = ParseToolChoice({{"type", "function"}, {"function", {{"name", "fly"}}}}, Tools(),
                                 "tool_choice");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error().message, Catch::Contains("tool_choice.function.name"));

  // In generate params: after tools, and not beside a response_format.
  Json params = {{"prompt", "x"}, {"tools", Tools()}, {"tool_choice", "required"}};
  auto g = medq::ParseGenerateParams(params);
  REQUIRE(g.ok());
  CHECK(medq::ToJson(*g) == params);
  params["response_format"] = {{"type", "json_object"}};
  CHECK_FALSE(medq::ParseGenerateParams(params).ok());
}

TEST_CASE("a forced choice's format is its calls' shape", "[common][tool_calls]") {
  const auto named =
      ForcedCallFormat(Tools(), {ToolChoice::Mode::kNamed, "get_weather"}, true, "tools");
  REQUIRE(named.ok());
  CHECK(named->schema == Tools()[0]["function"]["parameters"]);
  const auto required = ForcedCallFormat(Tools(), {ToolChoice::Mode::kRequired, ""}, true, "tools");
  REQUIRE(required.ok());
  CHECK(required->schema["maxItems"] == medq::kMaxParallelCalls);
  CHECK(ForcedCallFormat(Tools(), {ToolChoice::Mode::kRequired, ""}, false, "tools")
            ->schema["maxItems"] == 1);
  CHECK(required->schema["type"] == "array");
  CHECK(required->schema["items"]["anyOf"].size() == 2);
  CHECK(required->schema["items"]["anyOf"][1]["properties"]["name"]["const"] == "now");

  Json bad = Tools();
  bad[0]["function"]["parameters"]["oneOf"] = Json::array();
  const auto refused =
      ForcedCallFormat(bad, {ToolChoice::Mode::kRequired, ""}, true, "params.tools");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("params.tools[0].function.parameters"));
  CHECK_THAT(refused.error().message, Catch::Contains("\"oneOf\""));

  const auto calls = ForcedCalls(R"([{"name": "now", "parameters": {}}, {"name": "get_weather", )"
                                 R"("parameters": {"city": "Oslo"}}])",
                                 {ToolChoice::Mode::kRequired, ""}, Tools(), "j4");
  REQUIRE(calls.size() == 2);
  // An item naming no tool is left out (the fuzzer's find).
  CHECK(ForcedCalls(R"([{"name": "no9", "parameters": {}}])", {ToolChoice::Mode::kRequired, ""},
                    Tools(), "j7")
            .empty());
  CHECK(calls[0].id == "call_j4_0");
  CHECK(calls[1].name == "get_weather");
  CHECK(Json::parse(calls[1].arguments) == Json({{"city", "Oslo"}}));
  const auto one =
      ForcedCalls(R"({"city": "Oslo"})", {ToolChoice::Mode::kNamed, "get_weather"}, Tools(), "j5");
  REQUIRE(one.size() == 1);
  CHECK(one[0].name == "get_weather");
  CHECK(ForcedCalls(R"({"city": "Os)", {ToolChoice::Mode::kNamed, "get_weather"}, Tools(), "j6")
            .empty());
}

TEST_CASE("calls are read from the chat templates' syntaxes", "[common][tool_calls]") {
  // Qwen 2.5/3 and Hermes: blocks, with text around them.
  auto qwen = ParseToolCalls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": "
      "{}}\n</tool_call>",
      Tools(), "j1");
  REQUIRE(qwen.calls.size() == 2);
  CHECK(qwen.content == "Let me check.");
  CHECK(qwen.calls[0].id == "call_j1_0");
  CHECK(qwen.calls[0].name == "get_weather");
  CHECK(Json::parse(qwen.calls[0].arguments) == Json({{"city", "Paris"}}));
  CHECK(qwen.calls[1].name == "now");

  // Llama 3.1-3.3: the turn is one JSON object with "parameters".
  auto llama =
      ParseToolCalls(R"({"name": "get_weather", "parameters": {"city": "Rome"}})", Tools(), "j2");
  REQUIRE(llama.calls.size() == 1);
  CHECK(llama.content.empty());
  CHECK(Json::parse(llama.calls[0].arguments) == Json({{"city", "Rome"}}));
  CHECK(ParseToolCalls(R"(<|python_tag|>{"name": "now", "parameters": {}})", Tools(), "j")
            .calls.size() == 1);

  // Mistral: an array after [TOOL_CALLS] (a special token, usually decoded
  // away), arguments possibly as a JSON string.
  auto mistral = ParseToolCalls(
      R"( [{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": "{\"city\": \"Bonn\"}"}])",
      Tools(), "j3");
  REQUIRE(mistral.calls.size() == 2);
  CHECK(Json::parse(mistral.calls[1].arguments) == Json({{"city", "Bonn"}}));
  CHECK(ParseToolCalls(R"([TOOL_CALLS] [{"name": "now", "arguments": {}}])", Tools(), "j")
            .calls.size() == 1);

  // Not calls: plain text, JSON that names no tool, an unfinished block.
  for (const char* text : {"The weather is fine.", R"({"name": "Bob", "parameters": {}})",
                           R"({"name": "now", "arguments": "not json"})",
                           R"([{"name": "now", "arguments": {}}, {"name": "fly"}])",
                           "<tool_call>\n{\"name\": \"get_weather\", \"argu"}) {
    INFO(text);
    const auto turn = ParseToolCalls(text, Tools(), "j");
    CHECK(turn.calls.empty());
    CHECK(turn.content == text);
  }
}

TEST_CASE("an answer nested deeper than a request may be is text, not calls",
          "[common][tool_calls]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto turn = ParseToolCalls(deep, Tools(), "j");
  CHECK(turn.calls.empty());
  CHECK(turn.content == deep);
  CHECK(ForcedCalls(deep, {ToolChoice::Mode::kRequired, ""}, Tools(), "j").empty());
  CHECK(ForcedCalls(deep, {ToolChoice::Mode::kNamed, "now"}, Tools(), "j").empty());
}

TEST_CASE("a done event carries calls only when there are some", "[common][tool_calls]") {
  medq::GenerateDone done;
  done.finish_reason = medq::FinishReason::kStop;
  nlohmann::json j = done;
  CHECK_FALSE(j.contains("tool_calls"));
  CHECK_FALSE(j.contains("content"));
  done.finish_reason = medq::FinishReason::kToolCalls;
  done.tool_calls.push_back({"call_j1_0", "now", "{}"});
  done.content = "ok";
  j = done;
  CHECK(j["tool_calls"][0]["type"] == "function");
  CHECK(j["tool_calls"][0]["function"]["name"] == "now");
  const auto back = j.get<medq::GenerateDone>();
  CHECK(back.tool_calls.size() == 1);
  CHECK(back.tool_calls[0].id == "call_j1_0");
  CHECK(back.content == "ok");
}

// A stream of a turn that may hold calls sends ToolCallSafePrefix of it as it
// grows: never a marker, never less than before, and what it sent is where
// the final content begins.
TEST_CASE("a turn's safe prefix grows, holds back calls and begins the content",
          "[common][tool_calls]") {
  using medq::ToolCallSafePrefix;
  CHECK(ToolCallSafePrefix("") == 0);
  CHECK(ToolCallSafePrefix("  \n") == 0);
  CHECK(ToolCallSafePrefix("Hello there") == 11);
  CHECK(ToolCallSafePrefix("Hello there  ") == 11);
  CHECK(ToolCallSafePrefix("Hello <tool") == 5);
  CHECK(ToolCallSafePrefix("Hello <b>") == 9);
  CHECK(ToolCallSafePrefix("Let me check.\n<tool_call>\n{\"name\"") == 13);
  CHECK(ToolCallSafePrefix(" {\"name\": \"now\"") == 0);
  CHECK(ToolCallSafePrefix("[{\"name\"") == 0);
  CHECK(ToolCallSafePrefix("<|python_t") == 0);
  CHECK(ToolCallSafePrefix("<|python_tag|>{") == 0);
  CHECK(ToolCallSafePrefix("<i>x") == 4);

  const std::vector<std::string> pieces = {
      "Let",
      " me",
      " check",
      ".",
      "\n",
      "<",
      "tool",
      "_call",
      ">",
      "\n",
      "{\"name\": \"now\", ",
      "\"arguments\": {}}",
      "\n</tool_call>",
      " ",
      "é",
      "日本",
      "<|python_tag|>",
      "{",
      "[",
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>",
      "ok",
      "<t",
      "<b>",
      "  "};
  uint64_t state = 12345;
  const auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<size_t>(state >> 33);
  };
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    size_t sent = 0;
    const int n = 1 + static_cast<int>(next() % 12);
    for (int i = 0; i < n; ++i) {
      text += pieces[next() % pieces.size()];
      const size_t safe = ToolCallSafePrefix(text);
      INFO(text);
      REQUIRE(safe >= sent);
      REQUIRE(safe <= text.size());
      CHECK(text.substr(0, safe).find("<tool_call>") == std::string::npos);
      sent = safe;
    }
    const std::string streamed = text.substr(0, sent);
    const auto turn = ParseToolCalls(text, Tools(), "j");
    INFO(text);
    if (turn.calls.empty()) {
      CHECK(turn.content.substr(0, streamed.size()) == streamed);
    } else {
      const std::string sent_content = streamed.substr(
          std::min(streamed.size(), streamed.find_first_not_of(" \t\r\n") == std::string::npos
                                        ? streamed.size()
                                        : streamed.find_first_not_of(" \t\r\n")));
      CHECK(turn.content.substr(0, sent_content.size()) == sent_content);
    }
  }
}
