// Every row of every tokenizers/<name>/chat.jsonl fixture must render byte for
// byte to its `rendered` field (references made with Jinja2 as transformers
// configures it). Folders are discovered, not listed, so a new tokenizer
// dropped into the fixtures is checked the same way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/template/chat_template.h"
#include "tests/support/fixtures.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using medq::chat::ChatTemplate;
using medq::chat::TemplateInputs;

std::vector<fs::path> ChatFixtureDirs() {
  std::vector<fs::path> dirs;
  const fs::path root = medq::test::SharedDir() / "fixtures" / "tokenizers";
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory() && fs::exists(entry.path() / "chat.jsonl")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// Every row of dir/chat.jsonl renders with `tmpl` to its `rendered` field.
void CheckRows(const ChatTemplate& tmpl, const fs::path& dir) {
  std::ifstream in(dir / "chat.jsonl");
  REQUIRE(in.good());
  std::string line;
  int row = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++row;
    const auto rec = nlohmann::ordered_json::parse(line);
    TemplateInputs inputs;
    inputs.messages = rec.at("messages");
    inputs.add_generation_prompt = rec.at("add_generation_prompt").get<bool>();
    if (rec.contains("tools")) inputs.tools = rec.at("tools");
    if (rec.contains("template_kwargs")) inputs.extra = rec.at("template_kwargs");
    const auto rendered = tmpl.Render(inputs);
    INFO("row " << row << ": " << line.substr(0, 300));
    INFO("render error: " << (rendered.ok() ? std::string() : rendered.error().message));
    REQUIRE(rendered.ok());
    CHECK(*rendered == rec.at("rendered").get<std::string>());
  }
  CHECK(row > 0);
}

}  // namespace

TEST_CASE("chat.jsonl fixtures render byte for byte", "[template][fixtures]") {
  const std::vector<fs::path> dirs = ChatFixtureDirs();
  // The fixture set ships three tokenizers with chat templates; finding none
  // would mean the fixtures are missing, not that there is nothing to test.
  REQUIRE(dirs.size() >= 3);
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    auto tmpl = ChatTemplate::FromTokenizerConfig(dir / "tokenizer_config.json");
    INFO("tokenizer " << name);
    INFO("load error: " << (tmpl.ok() ? std::string() : tmpl.error().message));
    REQUIRE(tmpl.ok());
    CheckRows(*tmpl, dir);
  }
}

// The same fixtures saved as transformers 5 saves a tokenizer: the template
// in chat_template.jinja, none in tokenizer_config.json (its special tokens
// stay there). A model folder read that way renders the same bytes.
TEST_CASE("chat.jsonl fixtures render the same from chat_template.jinja", "[template][fixtures]") {
  const std::vector<fs::path> dirs = ChatFixtureDirs();
  REQUIRE(dirs.size() >= 3);
  for (const fs::path& dir : dirs) {
    INFO("tokenizer " << dir.filename().string());
    std::ifstream config_in(dir / "tokenizer_config.json");
    nlohmann::json config = nlohmann::json::parse(config_in);
    REQUIRE(config.at("chat_template").is_string());
    const medq::test::TempDir temp;
    const fs::path& folder = temp.path();
    std::ofstream(folder / "chat_template.jinja") << config.at("chat_template").get<std::string>();
    config.erase("chat_template");
    std::ofstream(folder / "tokenizer_config.json") << config.dump();
    auto tmpl = ChatTemplate::FromModelDir(folder);
    INFO("load error: " << (tmpl.ok() ? std::string() : tmpl.error().message));
    REQUIRE(tmpl.ok());
    CheckRows(*tmpl, dir);
  }
}
