#include "tests/support/model_repo.h"

#include <catch2/catch.hpp>

#include "tests/support/fixtures.h"

namespace medq::test {
namespace fs = std::filesystem;

namespace {

void LinkAll(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("reference", 0) == 0 || name == "README.md" ||
        name.find(".jsonl") != std::string::npos) {
      continue;
    }
    fs::create_symlink(entry.path(), to / name);
  }
}

}  // namespace

ModelRepo::ModelRepo() : dir_(tmp_.path() / "models") {
  struct Pair {
    const char* model;
    const char* tokenizer;
  };
  for (Pair p : {Pair{"tiny-llama", "mistral_v1"}, Pair{"tiny-llama3", "llama3"},
                 Pair{"tiny-qwen2", "qwen3"}}) {
    REQUIRE(fs::exists(ModelFixture(p.model)));
    LinkAll(ModelFixture(p.model), dir_ / p.model);
    LinkAll(TokenizerFixture(p.tokenizer), dir_ / p.model);
  }
  LinkAll(ModelFixture("tiny-llama-lora"), dir_ / "tiny-llama-lora");
}

void ModelRepo::AddModel(const std::string& name, const fs::path& source) const {
  REQUIRE(fs::exists(source));
  fs::create_directories(dir_ / name);
  for (const auto& entry : fs::directory_iterator(source))
    fs::create_symlink(entry.path(), dir_ / name / entry.path().filename());
}

}  // namespace medq::test
