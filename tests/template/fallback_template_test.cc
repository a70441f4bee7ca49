// The fallback chat template (daemon/template/fallback_template.h): ChatML,
// what it does with each kind of message content, and no special tokens.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/template/fallback_template.h"

namespace {

using medq::chat::FallbackChatTemplate;
using medq::chat::TemplateInputs;
using ordered_json = nlohmann::ordered_json;

TemplateInputs Conversation(ordered_json messages, bool add_generation_prompt = true) {
  TemplateInputs in;
  in.messages = std::move(messages);
  in.add_generation_prompt = add_generation_prompt;
  return in;
}

}  // namespace

TEST_CASE("the fallback template writes ChatML", "[template][fallback]") {
  const ordered_json messages = ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto text = FallbackChatTemplate().Render(Conversation(messages));
  REQUIRE(text.ok());
  CHECK(*text ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n");
  auto without_prompt = FallbackChatTemplate().Render(Conversation(messages, false));
  REQUIRE(without_prompt.ok());
  CHECK(*without_prompt ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST_CASE("the fallback template keeps the content's bytes and takes null as empty",
          "[template][fallback]") {
  auto text = FallbackChatTemplate().Render(
      Conversation(ordered_json::array({{{"role", "user"}, {"content", "a\n{{ b }} <|im_end|>"}},
                                        {{"role", "assistant"}, {"content", nullptr}},
                                        {{"role", "user"}}})));
  REQUIRE(text.ok());
  CHECK(*text ==
        "<|im_start|>user\na\n{{ b }} <|im_end|><|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
        "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("the fallback template refuses content that is not a string", "[template][fallback]") {
  auto text = FallbackChatTemplate().Render(Conversation(ordered_json::array(
      {{{"role", "user"}, {"content", ordered_json::array({{{"type", "text"}}})}}})));
  REQUIRE_FALSE(text.ok());
  CHECK(text.error().code == medq::ErrorCode::kInvalidRequest);
  CHECK_THAT(text.error().message, Catch::Contains("content that is a string"));
}

TEST_CASE("the fallback template writes no special tokens", "[template][fallback]") {
  // bos_token and friends are unset: the tokenizer adds its own.
  CHECK_FALSE(FallbackChatTemplate().special_tokens().bos_token.has_value());
  CHECK(FallbackChatTemplate().source().find("bos_token") == std::string::npos);
  CHECK(&FallbackChatTemplate() == &FallbackChatTemplate());  // parsed once
}
