// The ChatTemplate facade: loading from tokenizer_config.json (string or
// named templates, AddedToken special tokens), the variables a render sees,
// and concurrent rendering.
#include <catch2/catch.hpp>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/template/chat_template.h"
#include "tests/support/fixtures.h"

namespace {

namespace fs = std::filesystem;
using medq::chat::ChatTemplate;
using medq::chat::SpecialTokens;
using medq::chat::TemplateInputs;

// A temporary tokenizer_config.json, removed at scope exit.
class TempConfig {
 public:
  explicit TempConfig(const std::string& json) {
    path_ = fs::temp_directory_path() /
            ("medq_template_test_" + std::to_string(reinterpret_cast<uintptr_t>(this)) + ".json");
    std::ofstream(path_) << json;
  }
  ~TempConfig() {
    std::error_code ec;
    fs::remove(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string RenderOrError(const ChatTemplate& t, const TemplateInputs& in) {
  auto out = t.Render(in);
  return out.ok() ? *out : "ERROR: " + out.error().message;
}

}  // namespace

TEST_CASE("special tokens: strings and AddedToken objects", "[template][api]") {
  const auto cfg = nlohmann::json::parse(R"({
    "bos_token": {"__type": "AddedToken", "content": "<b>", "lstrip": false},
    "eos_token": "</s>", "unk_token": null, "pad_token": "<pad>"})");
  auto tokens = medq::chat::SpecialTokensFromConfig(cfg);
  REQUIRE(tokens.ok());
  CHECK(tokens->bos_token == "<b>");
  CHECK(tokens->eos_token == "</s>");
  CHECK_FALSE(tokens->unk_token.has_value());
  CHECK(tokens->pad_token == "<pad>");
  CHECK_FALSE(tokens->mask_token.has_value());

  auto bad = medq::chat::SpecialTokensFromConfig(nlohmann::json::parse(R"({"eos_token": 5})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == medq::ErrorCode::kInvalidRequest);
  CHECK(bad.error().message.find("eos_token") != std::string::npos);
}

TEST_CASE("render sees the variables transformers passes", "[template][api]") {
  SpecialTokens tokens;
  tokens.bos_token = "<s>";
  tokens.eos_token = "</s>";
  auto t = ChatTemplate::FromSource(
      "{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ add_generation_prompt }}|"
      "{{ tools }}|{{ documents }}|{{ messages|length }}|{{ enable_thinking }}|{{ custom }}",
      tokens);
  REQUIRE(t.ok());
  TemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x"}])");
  in.add_generation_prompt = false;
  in.extra = {{"enable_thinking", false}, {"custom", "c"}};
  // Python Jinja2 prints None as "None" (the JS reference engine would print "").
  CHECK(RenderOrError(*t, in) == "<s>|</s>|False|False|None|None|1|False|c");

  in.tools = nlohmann::ordered_json::parse(R"([{"name": "f"}])");
  in.documents = nlohmann::ordered_json::parse(R"([{"title": "t", "text": "x"}])");
  in.extra = nullptr;
  CHECK(RenderOrError(*t, in) ==
        "<s>|</s>|False|False|[{'name': 'f'}]|[{'title': 't', 'text': 'x'}]|1||");

  in.extra = nlohmann::ordered_json::array();
  auto out = t->Render(in);
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
}

TEST_CASE("tojson keeps the caller's key order", "[template][api]") {
  auto t = ChatTemplate::FromSource("{{ messages[0]|tojson }}", {});
  REQUIRE(t.ok());
  TemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(
      R"([{"zeta": 1, "alpha": {"y": 2.0, "b": [true, null, "é\n"]}, "mid": -3}])");
  CHECK(RenderOrError(*t, in) ==
        R"({"zeta": 1, "alpha": {"y": 2.0, "b": [true, null, "é\n"]}, "mid": -3})");
}

TEST_CASE("FromTokenizerConfig: string and named templates", "[template][api]") {
  SECTION("a string template and AddedToken bos") {
    TempConfig cfg(R"({"chat_template": "{{ bos_token }}{{ messages[0].content }}",
                       "bos_token": {"__type": "AddedToken", "content": "<B>"}})");
    auto t = ChatTemplate::FromTokenizerConfig(cfg.path());
    REQUIRE(t.ok());
    TemplateInputs in;
    in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
    CHECK(RenderOrError(*t, in) == "<B>hi");
  }
  SECTION("named templates pick 'default' unless told otherwise") {
    TempConfig cfg(R"({"chat_template": [
        {"name": "tool_use", "template": "TOOLS"},
        {"name": "default", "template": "DEFAULT"}]})");
    auto t = ChatTemplate::FromTokenizerConfig(cfg.path());
    REQUIRE(t.ok());
    CHECK(RenderOrError(*t, {}) == "DEFAULT");
    auto tools = ChatTemplate::FromTokenizerConfig(cfg.path(), "tool_use");
    REQUIRE(tools.ok());
    CHECK(RenderOrError(*tools, {}) == "TOOLS");
    auto missing = ChatTemplate::FromTokenizerConfig(cfg.path(), "rag");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message.find("'rag'") != std::string::npos);
  }
  SECTION("a named template whose name is not a string names nothing") {
    // Such a name (null included) threw out of FromTokenizerConfig; seen
    // while writing tests/fuzz/tokenizer_config_fuzz.
    TempConfig cfg(R"({"chat_template": [{"name": 1, "template": "ONE"},
        {"name": ["default"], "template": "LIST"}, {"name": "default", "template": "DEFAULT"}]})");
    auto t = ChatTemplate::FromTokenizerConfig(cfg.path());
    REQUIRE(t.ok());
    CHECK(RenderOrError(*t, {}) == "DEFAULT");
    TempConfig only(R"({"chat_template": [{"name": null, "template": "NULL"}]})");
    auto none = ChatTemplate::FromTokenizerConfig(only.path());
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == medq::ErrorCode::kInvalidRequest);
  }
  SECTION("a template with a syntax error names the file and position") {
    TempConfig cfg(R"({"chat_template": "ok\n{% if %}"})");
    auto t = ChatTemplate::FromTokenizerConfig(cfg.path());
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
    CHECK(t.error().message.find(cfg.path().filename().string()) != std::string::npos);
    CHECK(t.error().message.find("line 2") != std::string::npos);
  }
  SECTION("not JSON") {
    TempConfig cfg("{ not json");
    auto t = ChatTemplate::FromTokenizerConfig(cfg.path());
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
  }
}

TEST_CASE("a tokenizer without chat_template is an error", "[template][api]") {
  // mistral_v1's tokenizer_config.json has no chat_template.
  auto t = ChatTemplate::FromTokenizerConfig(medq::test::TokenizerFixture("mistral_v1") /
                                             "tokenizer_config.json");
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
  CHECK(t.error().message.find("no chat_template") != std::string::npos);

  auto missing = ChatTemplate::FromTokenizerConfig(medq::test::TokenizerFixture("mistral_v1") /
                                                   "no_such_file.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("cannot open") != std::string::npos);
}

TEST_CASE("strftime_now formats the current local time", "[template][api]") {
  auto t = ChatTemplate::FromSource("{{ strftime_now('%Y') }}", {});
  REQUIRE(t.ok());
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  CHECK(RenderOrError(*t, {}) == std::to_string(tm.tm_year + 1900));
}

TEST_CASE("one template renders from many threads at once", "[template][api]") {
  auto t = ChatTemplate::FromTokenizerConfig(medq::test::TokenizerFixture("qwen3") /
                                             "tokenizer_config.json");
  REQUIRE(t.ok());
  TemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])");
  const std::string expected = RenderOrError(*t, in);
  REQUIRE(expected.rfind("<|im_start|>system\ns<|im_end|>\n", 0) == 0);
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k)
        results[i] = RenderOrError(*t, in);
    });
  }
  for (auto& th : threads)
    th.join();
  for (const auto& r : results)
    CHECK(r == expected);
}
