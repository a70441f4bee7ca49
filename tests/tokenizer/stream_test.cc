// The streaming property over random id sequences: for every fixture
// tokenizer, pushing ids one by one into IncrementalDecoder and concatenating
// what it returns gives exactly Decode(ids), with and without skipping special
// tokens. Random ids stress what the fixture rows rarely reach: byte pieces
// that do not form UTF-8, special tokens between bytes, clean-up patterns.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "daemon/tokenizer/incremental_decoder.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"

namespace fs = std::filesystem;
using medq::tokenizer::IncrementalDecoder;
using medq::tokenizer::Tokenizer;

namespace {

// Ids that make streaming hard: single bytes, spaces, punctuation that the
// clean-up rewrites, and every added token.
std::vector<int32_t> InterestingIds(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    if (auto id = tok.TokenToId(name)) ids.push_back(*id);
  }
  for (const char* t : {"\u0120", "\u0120n", "'t", "'s", ".", ",", "\u0120'", "\u2581", "\u2581n",
                        "\u00e4", "\u00f0\u0141", "\u013a", "\u0142", "?", "!", "\u010a"}) {
    if (auto id = tok.TokenToId(t)) ids.push_back(*id);
  }
  for (int32_t id = 0; id < static_cast<int32_t>(tok.VocabSize()); ++id) {
    if (tok.IsSpecial(id)) {
      ids.push_back(id);
      if (ids.size() > 600) break;
    }
  }
  return ids;
}

}  // namespace

TEST_CASE("streaming equals Decode over random id sequences", "[tokenizer][stream]") {
  const fs::path root = medq::test::SharedDir() / "fixtures" / "tokenizers";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (fs::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(!dirs.empty());
  for (const auto& dir : dirs) {
    INFO("tokenizer " << dir.filename().string());
    auto loaded = Tokenizer::FromModelDir(dir);
    REQUIRE(loaded.ok());
    const Tokenizer& tok = **loaded;
    const auto interesting = InterestingIds(tok);
    REQUIRE(!interesting.empty());
    std::mt19937 rng(1234);
    const auto vocab = static_cast<int32_t>(tok.VocabSize());
    for (int round = 0; round < 150; ++round) {
      std::vector<int32_t> ids;
      const int n = 1 + static_cast<int>(rng() % 60);
      for (int k = 0; k < n; ++k) {
        ids.push_back(rng() % 3 == 0 ? static_cast<int32_t>(rng() % vocab)
                                     : interesting[rng() % interesting.size()]);
      }
      for (const bool skip : {false, true}) {
        IncrementalDecoder dec(tok, skip);
        std::string streamed;
        for (const int32_t id : ids)
          streamed += dec.Push(id);
        streamed += dec.Finish();
        std::string list;
        for (int32_t id : ids)
          list += std::to_string(id) + ",";
        INFO("ids " << list << " skip " << skip);
        CHECK(streamed == tok.Decode(ids, skip));
      }
    }
  }
}
