// The conversations the template fuzz targets render: a plain chat and one
// with tools, documents and extra variables, built once.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/template/chat_template.h"

namespace medq::fuzz {

inline const std::vector<chat::TemplateInputs>& Conversations() {
  static const std::vector<chat::TemplateInputs> all = [] {
    using nlohmann::ordered_json;
    chat::TemplateInputs plain;
    plain.messages = ordered_json::parse(R"([
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello."},
      {"role": "user", "content": "What is 2+2?"}])");
    chat::TemplateInputs rich;
    rich.messages = ordered_json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "{\"c\": 21}"}])");
    rich.add_generation_prompt = false;
    rich.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "weather",
      "description": "Today's weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
    rich.documents = ordered_json::parse(R"([{"title": "t", "text": "x"}])");
    rich.extra = ordered_json::parse(R"({"enable_thinking": false})");
    return std::vector<chat::TemplateInputs>{plain, rich};
  }();
  return all;
}

}  // namespace medq::fuzz
