#include "common/generate_params.h"

#include <catch2/catch.hpp>

namespace medq {

using nlohmann::json;

namespace {
std::string FailureOf(const json& params) {
  auto r = ParseGenerateParams(params);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  return r.error().message;
}
}  // namespace

TEST_CASE("generate params parse with defaults and round-trip", "[generate]") {
  auto p = ParseGenerateParams(json{{"prompt", "hi"}});
  REQUIRE(p.ok());
  CHECK(!p->max_tokens.has_value());  // the daemon picks: 256 or what the context leaves
  CHECK(EffectiveMaxTokens(*p, 1000) == kDefaultMaxTokens);
  CHECK(EffectiveMaxTokens(*p, 100) == 100);
  p->max_tokens = 300;
  CHECK(EffectiveMaxTokens(*p, 100) == 300);  // explicit: the context check refuses it
  CHECK(p->temperature == 0);
  CHECK(p->priority == "normal");
  CHECK(p->mode == PromptMode::kAuto);

  json full = {
      {"model", "m"},       {"adapter", "a"},    {"prompt", "hi"},        {"mode", "raw"},
      {"system", "s"},      {"max_tokens", 9},   {"temperature", 0.5},    {"top_k", 4},
      {"top_p", 0.9},       {"min_p", 0.1},      {"repeat_penalty", 1.1}, {"seed", 7},
      {"stop", {"x", "y"}}, {"priority", "low"}, {"queue_timeout_s", 3},  {"return_ids", true}};
  auto parsed = ParseGenerateParams(full);
  REQUIRE(parsed.ok());
  auto again = ParseGenerateParams(ToJson(*parsed));
  REQUIRE(again.ok());
  CHECK(ToJson(*again) == ToJson(*parsed));
  CHECK(again->seed == 7u);
  CHECK(again->stop == std::vector<std::string>{"x", "y"});
  CHECK(again->mode == PromptMode::kRaw);
}

TEST_CASE("each bad generate param is named", "[generate]") {
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"temprature", 1}}), Catch::Contains("params.temprature"));
  CHECK_THAT(FailureOf({{"prompt", ""}}), Catch::Contains("params.prompt"));
  CHECK_THAT(FailureOf(json::object()), Catch::Contains("exactly one"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"prompt_ids", {1}}}), Catch::Contains("exactly one"));
  CHECK_THAT(FailureOf({{"prompt_ids", json::array()}}), Catch::Contains("params.prompt_ids"));
  CHECK_THAT(FailureOf({{"prompt_ids", {1, -2}}}), Catch::Contains("params.prompt_ids"));
  CHECK_THAT(FailureOf({{"messages", {{{"content", "x"}}}}}), Catch::Contains("params.messages"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"max_tokens", 0}}), Catch::Contains("params.max_tokens"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"max_tokens", 1.5}}),
             Catch::Contains("params.max_tokens"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"temperature", -1}}),
             Catch::Contains("params.temperature"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"top_p", 0}}), Catch::Contains("params.top_p"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"top_p", 1.5}}), Catch::Contains("params.top_p"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"repeat_penalty", 0}}),
             Catch::Contains("params.repeat_penalty"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"seed", -1}}), Catch::Contains("params.seed"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"stop", {""}}}), Catch::Contains("params.stop"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"priority", "asap"}}),
             Catch::Contains("params.priority"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"mode", "chatty"}}), Catch::Contains("params.mode"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"queue_timeout_s", 0}}),
             Catch::Contains("params.queue_timeout_s"));
  CHECK_THAT(FailureOf({{"prompt", "x"}, {"return_ids", "yes"}}),
             Catch::Contains("params.return_ids"));
}

}  // namespace medq
