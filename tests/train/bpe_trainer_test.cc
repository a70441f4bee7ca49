#include "tools/medq-train/bpe_trainer.h"

#include <catch2/catch.hpp>

#include "daemon/tokenizer/tokenizer.h"

namespace medq::train {
namespace {

// Four verses, three times over, so that their pairs repeat.
std::vector<std::string> SmallCorpus() {
  const std::vector<std::string> verses = {
      "And God said, Let there be light: and there was light.",
      "And God saw the light, that it was good: and God divided the light from the darkness.",
      "And God called the light Day, and the darkness he called Night.",
      "And the evening and the morning were the first day.",
  };
  std::vector<std::string> docs;
  for (int i = 0; i < 3; ++i)
    docs.insert(docs.end(), verses.begin(), verses.end());
  return docs;
}

std::unique_ptr<tokenizer::Tokenizer> Load(const BpeVocabulary& v) {
  auto t = tokenizer::Tokenizer::FromJson(TokenizerJson(v), TokenizerConfigJson(v), "trained");
  REQUIRE(t.ok());
  return std::move(t).value();
}

}  // namespace

TEST_CASE("BPE training lays out special tokens, bytes, then merges", "[bpe]") {
  auto v = TrainByteLevelBpe(SmallCorpus(), 300, {"<|endoftext|>"});
  REQUIRE(v.ok());
  REQUIRE(v->tokens.size() == 300);
  CHECK(v->num_special == 1);
  CHECK(v->tokens[0] == "<|endoftext|>");
  CHECK(v->tokens[1 + ' '] == "\xC4\xA0");  // byte 0x20 is "Ġ" in GPT-2's alphabet
  CHECK(v->tokens[1 + 'A'] == "A");
  REQUIRE(v->merges.size() == 300 - 257);
  // Each merge's token is the concatenation of its pair, in order.
  for (size_t i = 0; i < v->merges.size(); ++i)
    CHECK(v->tokens[257 + i] == v->merges[i].first + v->merges[i].second);
  // Frequent words become whole tokens.
  CHECK(std::find(v->tokens.begin(), v->tokens.end(), "\xC4\xA0light") != v->tokens.end());
  CHECK(std::find(v->tokens.begin(), v->tokens.end(), "\xC4\xA0God") != v->tokens.end());
}

TEST_CASE("BPE training is deterministic and stops when no pair repeats", "[bpe]") {
  auto a = TrainByteLevelBpe(SmallCorpus(), 100000, {"<|endoftext|>"});
  auto b = TrainByteLevelBpe(SmallCorpus(), 100000, {"<|endoftext|>"});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->tokens == b->tokens);
  CHECK(a->merges == b->merges);
  CHECK(a->tokens.size() < 100000);  // ran out of pairs occurring twice
  CHECK(!TrainByteLevelBpe(SmallCorpus(), 200, {"<|endoftext|>"}).ok());
}

TEST_CASE("the trained tokenizer.json loads and round-trips any text", "[bpe]") {
  auto v = TrainByteLevelBpe(SmallCorpus(), 320, {"<|endoftext|>"});
  REQUIRE(v.ok());
  const auto t = Load(*v);
  CHECK(t->VocabSize() == 320);
  CHECK(t->EosId() == 0);
  CHECK(t->BosId() == 0);
  CHECK(t->IsSpecial(0));
  for (const std::string& text :
       {SmallCorpus()[1],
        std::string("Unseen words, digits 1234 and \xC3\xA9t\xC3\xA9 \xE2\x9C\x93"),
        std::string("  two  spaces\nand a newline<|endoftext|>after")}) {
    const std::vector<int32_t> ids = t->Encode(text, /*add_special_tokens=*/false);
    CHECK(t->Decode(ids) == text);
  }
  // Known text compresses: far fewer tokens than bytes.
  const std::string seen = SmallCorpus()[1];
  CHECK(t->Encode(seen, false).size() * 3 < seen.size());
  // The special token written in text is one id.
  const auto ids = t->Encode("a<|endoftext|>b", false);
  CHECK(std::count(ids.begin(), ids.end(), 0) == 1);
  // Nothing is added to encoded text: no post-processor.
  CHECK(t->Encode("light", true) == t->Encode("light", false));
}

}  // namespace medq::train
