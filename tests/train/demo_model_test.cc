// The shipped demo model (models/medq-demo) must load, stay small, and write
// English: most words of a greedy continuation are dictionary words.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/engine/engine.h"
#include "daemon/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

const fs::path kDemo = MEDQ_DEMO_MODEL_DIR;
// Debian's wamerican word list (scripts/setup-deps installs it).
const fs::path kWords = "/usr/share/dict/words";

std::set<std::string> Dictionary() {
  std::set<std::string> words;
  std::ifstream in(kWords);
  std::string w;
  while (std::getline(in, w)) {
    for (char& c : w)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    words.insert(w);
  }
  return words;
}

// Runs of two or more letters, lower-cased.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      if (cur.size() >= 2) out.push_back(cur);
      cur.clear();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the demo model is a small standard Hugging Face directory", "[demo]") {
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json", "training.json", "README.md"}) {
    INFO(f);
    CHECK(fs::is_regular_file(kDemo / f));
  }
  CHECK(fs::file_size(kDemo / "model.safetensors") <= 20u << 20);
  std::ifstream config_file(kDemo / "config.json");
  const auto config = nlohmann::json::parse(config_file);
  CHECK(config.at("architectures")[0] == "LlamaForCausalLM");
  CHECK(config.at("torch_dtype") == "bfloat16");
}

TEST_CASE("the demo model continues a prompt in English words", "[demo]") {
  REQUIRE(fs::exists(kWords));
  auto model = medq::engine::LoadModel(kDemo, {"cpu", "auto"});
  REQUIRE(model.ok());
  auto tok = medq::tokenizer::Tokenizer::FromModelDir(kDemo);
  REQUIRE(tok.ok());
  CHECK(static_cast<int64_t>((*tok)->VocabSize()) == medq::engine::Info(**model).vocab_size);

  const std::set<std::string> dictionary = Dictionary();
  for (const char* prompt : {"And God said", "The king of Israel", "In the morning"}) {
    medq::engine::GenerateRequest r;
    r.prompt = (*tok)->Encode(prompt, /*add_special_tokens=*/false);
    r.max_new_tokens = 48;
    r.sampling.repetition_penalty = 1.1f;
    std::vector<int32_t> out;
    auto res = medq::engine::Generate(**model, r, [&](int32_t id) {
      out.push_back(id);
      return true;
    });
    REQUIRE(res.ok());
    const std::string text = (*tok)->Decode(out, /*skip_special_tokens=*/true);
    const std::vector<std::string> words = Words(text);
    size_t known = 0;
    for (const std::string& w : words)
      known += dictionary.count(w);
    INFO(prompt << " ->" << text);
    CHECK(words.size() >= 8);
    CHECK(known * 10 >= words.size() * 8);  // at least 80% dictionary words
  }
}
