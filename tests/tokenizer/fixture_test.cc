// Checks every tokenizer folder under fixtures/tokenizers/ against the
// Hugging Face reference outputs recorded there (cases.jsonl, chat.jsonl).
// Folders are discovered, not listed, so a new tokenizer dropped there is
// checked the same way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/tokenizer/incremental_decoder.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"

namespace fs = std::filesystem;
using medq::tokenizer::IncrementalDecoder;
using medq::tokenizer::Tokenizer;

namespace {

std::vector<fs::path> TokenizerFolders() {
  std::vector<fs::path> dirs;
  const fs::path root = medq::test::SharedDir() / "fixtures" / "tokenizers";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "tokenizer.json")) {
      dirs.push_back(entry.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<nlohmann::json> ReadJsonl(const fs::path& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

std::string Streamed(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDecoder dec(tok, skip);
  std::string out;
  for (const int32_t id : ids)
    out += dec.Push(id);
  out += dec.Finish();
  return out;
}

}  // namespace

TEST_CASE("fixture tokenizers are present", "[tokenizer][fixtures]") {
  REQUIRE(TokenizerFolders().size() >= 4);
}

TEST_CASE("fixture cases.jsonl match the reference", "[tokenizer][fixtures]") {
  for (const auto& dir : TokenizerFolders()) {
    const std::string name = dir.filename().string();
    INFO("tokenizer " << name);
    auto loaded = Tokenizer::FromModelDir(dir);
    REQUIRE(loaded.ok());
    const Tokenizer& tok = **loaded;
    const auto rows = ReadJsonl(dir / "cases.jsonl");
    REQUIRE(!rows.empty());
    size_t failures = 0;
    for (const auto& row : rows) {
      const std::string text = row.at("text").get<std::string>();
      INFO("text " << nlohmann::json(text).dump());
      const auto ids = row.at("ids").get<std::vector<int32_t>>();
      const auto ids_ns = row.at("ids_no_special").get<std::vector<int32_t>>();
      const auto tokens = row.at("tokens").get<std::vector<std::string>>();
      const auto got = tok.Encode(text, true);
      const auto got_ns = tok.Encode(text, false);
      std::vector<std::string> got_tokens;
      for (const int32_t id : got)
        got_tokens.push_back(tok.IdToToken(id));
      const std::string decoded = tok.Decode(ids, false);
      const std::string decoded_skip = tok.Decode(ids, true);
      CHECK(got == ids);
      CHECK(got_ns == ids_ns);
      CHECK(got_tokens == tokens);
      CHECK(decoded == row.at("decoded").get<std::string>());
      CHECK(decoded_skip == row.at("decoded_skip_special").get<std::string>());
      // Streaming property: the pieces concatenate to Decode of all ids.
      CHECK(Streamed(tok, ids, false) == decoded);
      CHECK(Streamed(tok, ids, true) == decoded_skip);
      if (got != ids || got_ns != ids_ns || decoded != row.at("decoded").get<std::string>() ||
          decoded_skip != row.at("decoded_skip_special").get<std::string>()) {
        ++failures;
      }
    }
    CHECK(failures == 0);
  }
}

TEST_CASE("fixture chat.jsonl renders encode to the reference ids", "[tokenizer][fixtures]") {
  for (const auto& dir : TokenizerFolders()) {
    if (!fs::exists(dir / "chat.jsonl")) continue;
    INFO("tokenizer " << dir.filename().string());
    auto loaded = Tokenizer::FromModelDir(dir);
    REQUIRE(loaded.ok());
    for (const auto& row : ReadJsonl(dir / "chat.jsonl")) {
      const std::string rendered = row.at("rendered").get<std::string>();
      INFO("rendered " << nlohmann::json(rendered).dump());
      const auto ids = row.at("ids").get<std::vector<int32_t>>();
      CHECK((*loaded)->Encode(rendered, false) == ids);
      const std::string decoded = (*loaded)->Decode(ids);
      CHECK(Streamed(**loaded, ids, false) == decoded);
    }
  }
}

TEST_CASE("fixture bos/eos ids come from tokenizer_config.json", "[tokenizer][fixtures]") {
  const auto mistral = Tokenizer::FromModelDir(medq::test::TokenizerFixture("mistral_v1"));
  REQUIRE(mistral.ok());
  CHECK((*mistral)->BosId() == std::optional<int32_t>(1));
  CHECK((*mistral)->EosId() == std::optional<int32_t>(2));
  CHECK((*mistral)->VocabSize() == 32000);
  const auto llama3 = Tokenizer::FromModelDir(medq::test::TokenizerFixture("llama3"));
  REQUIRE(llama3.ok());
  CHECK((*llama3)->BosId() == std::optional<int32_t>(128000));
  CHECK((*llama3)->EosId() == (*llama3)->TokenToId("<|eot_id|>"));
  CHECK((*llama3)->VocabSize() == 128256);
  CHECK((*llama3)->IsSpecial(128000));
  CHECK(!(*llama3)->IsSpecial(9906));
  const auto qwen = Tokenizer::FromModelDir(medq::test::TokenizerFixture("qwen3"));
  REQUIRE(qwen.ok());
  CHECK(!(*qwen)->BosId().has_value());  // bos_token is null
  CHECK((*qwen)->EosId() == (*qwen)->TokenToId("<|im_end|>"));
  // AddedToken-object form of bos_token.
  const auto deepseek = Tokenizer::FromModelDir(medq::test::TokenizerFixture("deepseek_v3"));
  REQUIRE(deepseek.ok());
  CHECK((*deepseek)->BosId() == std::optional<int32_t>(0));
  CHECK((*deepseek)->EosId() == std::optional<int32_t>(1));
}

// TokenBytes is what a grammar matches tokens against: for every case whose
// reference decoding is the text itself, the tokens' bytes concatenate to
// that text, up to the space a Metaspace/SentencePiece tokenizer prepends.
TEST_CASE("fixture TokenBytes concatenate to the text", "[tokenizer][fixtures]") {
  for (const auto& dir : TokenizerFolders()) {
    INFO("tokenizer " << dir.filename().string());
    auto loaded = Tokenizer::FromModelDir(dir);
    REQUIRE(loaded.ok());
    const Tokenizer& tok = **loaded;
    size_t checked = 0;
    for (const auto& row : ReadJsonl(dir / "cases.jsonl")) {
      const std::string text = row.at("text").get<std::string>();
      if (row.at("decoded_skip_special").get<std::string>() != text || text.empty()) continue;
      INFO("text " << nlohmann::json(text).dump());
      std::string bytes;
      for (const int32_t id : row.at("ids_no_special").get<std::vector<int32_t>>()) {
        const auto piece = tok.TokenBytes(id);
        REQUIRE(piece.has_value());
        bytes += *piece;
      }
      CHECK((bytes == text || bytes == " " + text));
      ++checked;
    }
    CHECK(checked > 0);
    CHECK(!tok.TokenBytes(static_cast<int32_t>(tok.VocabSize()) + 5).has_value());
  }
}
