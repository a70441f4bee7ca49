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
      const auto rendered = tmpl->Render(inputs);
      INFO("row " << row << ": " << line.substr(0, 300));
      INFO("render error: " << (rendered.ok() ? std::string() : rendered.error().message));
      REQUIRE(rendered.ok());
      CHECK(*rendered == rec.at("rendered").get<std::string>());
    }
    CHECK(row > 0);
  }
}
