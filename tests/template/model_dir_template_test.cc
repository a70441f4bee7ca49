// ChatTemplate::FromModelDir: which template a model folder has, as
// transformers reads it (template files first, then tokenizer_config.json).
// The shared fixtures rendered from chat_template.jinja are in
// chat_fixture_test.cc.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "daemon/template/chat_template.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using medq::chat::ChatTemplate;
using medq::chat::TemplateInputs;

// A temporary model folder (removed at scope exit) with `text` at `name`.
class TempFolder {
 public:
  void Write(const fs::path& name, const std::string& text) const {
    fs::create_directories((path() / name).parent_path());
    std::ofstream(path() / name) << text;
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  medq::test::TempDir dir_;
};

// The render of one user message "hi", or the error message.
std::string Render(const medq::Result<ChatTemplate>& t) {
  if (!t.ok()) return "error: " + t.error().message;
  TemplateInputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  auto out = t->Render(in);
  return out.ok() ? *out : "error: " + out.error().message;
}

}  // namespace

TEST_CASE("FromModelDir reads chat_template.jinja with the config's tokens", "[template][api]") {
  TempFolder dir;
  dir.Write("tokenizer_config.json", R"({"bos_token": "<B>"})");
  dir.Write("chat_template.jinja", "{{ bos_token }}[{{ messages[0].content }}]");
  CHECK(Render(ChatTemplate::FromModelDir(dir.path())) == "<B>[hi]");
}

TEST_CASE("FromModelDir: template files win over the config's template", "[template][api]") {
  TempFolder dir;
  dir.Write("tokenizer_config.json", R"({"chat_template": "CONFIG"})");
  SECTION("no files: the config's") {
    CHECK(Render(ChatTemplate::FromModelDir(dir.path())) == "CONFIG");
  }
  SECTION("chat_template.jinja is the default") {
    dir.Write("chat_template.jinja", "FILE");
    CHECK(Render(ChatTemplate::FromModelDir(dir.path())) == "FILE");
  }
  SECTION("additional_chat_templates/NAME.jinja is NAME") {
    dir.Write("chat_template.jinja", "FILE");
    dir.Write("additional_chat_templates/tool_use.jinja", "TOOLS");
    CHECK(Render(ChatTemplate::FromModelDir(dir.path(), "tool_use")) == "TOOLS");
    CHECK(Render(ChatTemplate::FromModelDir(dir.path())) == "FILE");
    CHECK_THAT(Render(ChatTemplate::FromModelDir(dir.path(), "rag")),
               Catch::Contains("no chat template named 'rag'"));
  }
  SECTION("named files alone replace the config's templates, default included") {
    // As transformers: once there are template files, they are the templates.
    dir.Write("additional_chat_templates/tool_use.jinja", "TOOLS");
    CHECK_THAT(Render(ChatTemplate::FromModelDir(dir.path())),
               Catch::Contains("no chat template named 'default'"));
    CHECK(Render(ChatTemplate::FromModelDir(dir.path(), "tool_use")) == "TOOLS");
  }
  SECTION("a folder of other files is not templates") {
    dir.Write("additional_chat_templates/README.md", "notes");
    CHECK(Render(ChatTemplate::FromModelDir(dir.path())) == "CONFIG");
  }
}

TEST_CASE("FromModelDir: a name is never a path", "[template][api]") {
  TempFolder dir;
  dir.Write("chat_template.jinja", "FILE");
  dir.Write("outside.jinja", "OUTSIDE");
  for (const char* name : {"../outside", "..", ".", "", "a/b", "a\\b"}) {
    INFO("name '" << name << "'");
    CHECK_THAT(Render(ChatTemplate::FromModelDir(dir.path(), name)),
               Catch::Contains("no chat template named"));
  }
}

TEST_CASE("FromModelDir: errors name the file", "[template][api]") {
  TempFolder dir;
  SECTION("a template with a syntax error") {
    dir.Write("chat_template.jinja", "ok\n{% if %}");
    const std::string out = Render(ChatTemplate::FromModelDir(dir.path()));
    CHECK_THAT(out, Catch::Contains("chat_template.jinja"));
    CHECK_THAT(out, Catch::Contains("line 2"));
  }
  SECTION("a config that is not JSON") {
    dir.Write("chat_template.jinja", "FILE");
    dir.Write("tokenizer_config.json", "{ not json");
    CHECK_THAT(Render(ChatTemplate::FromModelDir(dir.path())),
               Catch::Contains("tokenizer_config.json: not valid JSON"));
  }
  SECTION("no template anywhere") {
    dir.Write("tokenizer_config.json", "{}");
    CHECK_THAT(Render(ChatTemplate::FromModelDir(dir.path())),
               Catch::Contains("has no chat_template"));
  }
  SECTION("no config either") {
    auto t = ChatTemplate::FromModelDir(dir.path());
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
  }
}
