// Unit tests for pipeline components that the fixture tokenizers do not
// reach. Expected values are derived by hand from the Hugging Face
// `tokenizers` semantics (many are the examples of its own Rust tests and
// documentation); each case says what rule it checks.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/tokenizer/decoder.h"
#include "daemon/tokenizer/normalizer.h"
#include "daemon/tokenizer/post_processor.h"
#include "daemon/tokenizer/pre_tokenizer.h"
#include "daemon/tokenizer/tokenizer.h"

using json = nlohmann::json;
using medq::tokenizer::Piece;
using medq::tokenizer::Tokenizer;
using Strings = std::vector<std::string>;

namespace {

Strings PreTok(const json& spec, const std::string& text, bool at_origin = true) {
  auto p = medq::tokenizer::ParsePreTokenizer(spec);
  REQUIRE(p.ok());
  std::vector<Piece> pieces{{text, at_origin}};
  (*p)->PreTokenize(pieces);
  Strings out;
  for (const auto& piece : pieces)
    out.push_back(piece.text);
  return out;
}

std::string Norm(const json& spec, std::string text) {
  auto n = medq::tokenizer::ParseNormalizer(spec);
  REQUIRE(n.ok());
  (*n)->Normalize(text);
  return text;
}

Strings Dec(const json& spec, Strings tokens) {
  auto d = medq::tokenizer::ParseDecoder(spec, nullptr);
  REQUIRE(d.ok());
  (*d)->DecodeChain(tokens);
  return tokens;
}

json SplitSpec(const json& pattern, const char* behavior, bool invert = false) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

std::unique_ptr<Tokenizer> Build(const json& spec) {
  auto t = Tokenizer::FromJson(spec.dump());
  INFO((t.ok() ? std::string() : t.error().message));
  REQUIRE(t.ok());
  return std::move(t).value();
}

// A character-level BPE: " " = 0, "a" = 1 ... "z" = 26, no merges, and no
// normalizer or pre-tokenizer, so every character becomes one id.
json CharBpe() {
  json vocab = json::object();
  vocab[" "] = 0;
  for (int c = 0; c < 26; ++c)
    vocab[std::string(1, static_cast<char>('a' + c))] = c + 1;
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}};
}

}  // namespace

TEST_CASE("Split pre-tokenizer behaviours", "[tokenizer][pre_tokenizer]") {
  const json space = {{"String", " "}};
  const std::string text = "How are you doing?";
  CHECK(PreTok(SplitSpec(space, "Removed"), text) == Strings{"How", "are", "you", "doing?"});
  CHECK(PreTok(SplitSpec(space, "Isolated"), text) ==
        Strings{"How", " ", "are", " ", "you", " ", "doing?"});
  CHECK(PreTok(SplitSpec(space, "MergedWithPrevious"), text) ==
        Strings{"How ", "are ", "you ", "doing?"});
  CHECK(PreTok(SplitSpec(space, "MergedWithNext"), text) ==
        Strings{"How", " are", " you", " doing?"});
  // Contiguous joins adjacent delimiter matches; Isolated keeps them apart.
  CHECK(PreTok(SplitSpec(space, "Contiguous"), "How  are") == Strings{"How", "  ", "are"});
  CHECK(PreTok(SplitSpec(space, "Isolated"), "How  are") == Strings{"How", " ", " ", "are"});
  // invert: the non-matches become the delimiters.
  const json digits = {{"Regex", "\\d+"}};
  CHECK(PreTok(SplitSpec(digits, "Removed", true), "ab12cd345") == Strings{"12", "345"});
  CHECK(PreTok(SplitSpec(digits, "MergedWithPrevious", true), "ab12cd") == Strings{"ab", "12cd"});
  CHECK(PreTok(SplitSpec(digits, "Removed"), "ab12cd345") == Strings{"ab", "cd"});
  // A string pattern is literal, not a regex.
  CHECK(PreTok(SplitSpec({{"String", "."}}, "Removed"), "a.b|c") == Strings{"a", "b|c"});
}

TEST_CASE("Digits, Punctuation, Whitespace, WhitespaceSplit", "[tokenizer][pre_tokenizer]") {
  CHECK(PreTok({{"type", "Digits"}, {"individual_digits", false}}, "Call 123 please") ==
        Strings{"Call ", "123", " please"});
  CHECK(PreTok({{"type", "Digits"}, {"individual_digits", true}}, "Call 123 please") ==
        Strings{"Call ", "1", "2", "3", " please"});
  CHECK(PreTok({{"type", "Punctuation"}}, "Hey friend!     How are you?!?") ==
        Strings{"Hey friend", "!", "     How are you", "?", "!", "?"});
  CHECK(PreTok({{"type", "Whitespace"}}, "Hey man!") == Strings{"Hey", "man", "!"});
  CHECK(PreTok({{"type", "Whitespace"}}, "How are you doing?") ==
        Strings{"How", "are", "you", "doing", "?"});
  CHECK(PreTok({{"type", "Whitespace"}}, "\n").empty());
  CHECK(PreTok({{"type", "WhitespaceSplit"}}, "Hey man!\tok\u3000x") ==
        Strings{"Hey", "man!", "ok", "x"});
}

TEST_CASE("Metaspace pre-tokenizer options", "[tokenizer][pre_tokenizer]") {
  const std::string m = "\u2581";
  json spec = {
      {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}};
  CHECK(PreTok(spec, "Hey friend") == Strings{m + "Hey", m + "friend"});
  CHECK(PreTok(spec, "Hey", false) == Strings{m + "Hey"});
  spec["split"] = false;
  CHECK(PreTok(spec, "Hey friend") == Strings{m + "Hey" + m + "friend"});
  spec["split"] = true;
  spec["prepend_scheme"] = "never";
  CHECK(PreTok(spec, "Hey friend") == Strings{"Hey", m + "friend"});
  // "first" prepends only to the piece that starts the original input.
  spec["prepend_scheme"] = "first";
  CHECK(PreTok(spec, "Hey friend") == Strings{m + "Hey", m + "friend"});
  CHECK(PreTok(spec, "Hey friend", false) == Strings{"Hey", m + "friend"});
}

TEST_CASE("ByteLevel pre-tokenizer", "[tokenizer][pre_tokenizer]") {
  const json with_regex = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  CHECK(PreTok(with_regex, "Hello world") == Strings{"\u0120Hello", "\u0120world"});
  CHECK(PreTok(with_regex, "I'm 42!") == Strings{"\u0120I", "'m", "\u012042", "!"});
  const json no_regex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  CHECK(PreTok(no_regex, "Hello world\n") == Strings{"Hello\u0120world\u010a"});
}

TEST_CASE("normalizers", "[tokenizer][normalizer]") {
  CHECK(Norm({{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, " \t hi \n") ==
        "hi");
  CHECK(Norm({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}, "  hi  ") ==
        "hi  ");
  CHECK(Norm({{"type", "Lowercase"}}, "HeLLo \u00c0\u00c9 \u03a3") == "hello \u00e0\u00e9 \u03c3");
  // Compatibility forms: the "fi" ligature and a circled digit.
  CHECK(Norm({{"type", "NFKC"}}, "\ufb01\u2460") == "fi1");
  CHECK(Norm({{"type", "NFD"}}, "\u00e9") == "e\u0301");
  CHECK(Norm({{"type", "NFC"}}, "e\u0301") == "\u00e9");
  CHECK(Norm({{"type", "NFKD"}}, "\u00bd") == "1\u20442");
  CHECK(Norm({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}},
             "a   b  c d") == "a b c d");
  CHECK(Norm({{"type", "Replace"}, {"pattern", {{"String", "."}}}, {"content", "!"}}, "a.b.") ==
        "a!b!");
  CHECK(Norm({{"type", "Prepend"}, {"prepend", "\u2581"}}, "x") == "\u2581x");
  CHECK(Norm({{"type", "Prepend"}, {"prepend", "\u2581"}}, "").empty());
  CHECK(
      Norm({{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}, {{"type", "Strip"}}}}},
           "  ABC ") == "abc");
}

TEST_CASE("decoders", "[tokenizer][decoder]") {
  const std::string m = "\u2581";
  CHECK(Dec({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}, {"  a  "}) ==
        Strings{" a "});
  CHECK(Dec({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}},
            {m + "Hey", m + "friend"}) == Strings{"Hey", " friend"});
  CHECK(Dec({{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}},
            {m + "Hey", m + "friend"}) == Strings{" Hey", " friend"});
  CHECK(Dec({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}},
            {"un", "##aff", "##able", "hello", ",", "it", "'s"}) ==
        Strings{"un", "aff", "able", " hello", ",", " it", "'s"});
  CHECK(Dec({{"type", "ByteFallback"}}, {"<0xE4>", "<0xBD>", "<0xA0>", "a"}) ==
        Strings{"\u4f60", "a"});
  // An invalid byte run becomes one U+FFFD per byte (the Rust rule).
  CHECK(Dec({{"type", "ByteFallback"}}, {"<0xE4>", "<0xBD>", "a"}) ==
        Strings{"\ufffd", "\ufffd", "a"});
  CHECK(Dec({{"type", "Fuse"}}, {"a", "b", "c"}) == Strings{"abc"});
  CHECK(Dec({{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}}, {m + "a" + m}) ==
        Strings{" a "});
  CHECK(Dec({{"type", "ByteLevel"}}, {"\u0120Hello", "\u010a"}) == Strings{" Hello\n"});
}

TEST_CASE("TemplateProcessing single and pair", "[tokenizer][post_processor]") {
  const json spec = {{"type", "TemplateProcessing"},
                     {"single", "[CLS] $A [SEP]"},
                     {"pair", "[CLS] $A [SEP] $B:1 [SEP]:1"},
                     {"special_tokens",
                      {{"[CLS]", {{"id", "[CLS]"}, {"ids", {101}}, {"tokens", {"[CLS]"}}}},
                       {"[SEP]", {{"id", "[SEP]"}, {"ids", {102}}, {"tokens", {"[SEP]"}}}}}}};
  auto p = medq::tokenizer::ParsePostProcessor(spec);
  REQUIRE(p.ok());
  const std::vector<int32_t> a{1, 2};
  const std::vector<int32_t> b{3};
  CHECK((*p)->Process(a, nullptr, true) == std::vector<int32_t>{101, 1, 2, 102});
  CHECK((*p)->Process(a, &b, true) == std::vector<int32_t>{101, 1, 2, 102, 3, 102});
  CHECK((*p)->Process(a, &b, false) == std::vector<int32_t>{1, 2, 3});
  auto missing = medq::tokenizer::ParsePostProcessor(
      {{"type", "TemplateProcessing"}, {"single", "[X] $A"}, {"pair", "$A $B"}});
  CHECK(!missing.ok());
}

TEST_CASE("WordPiece model with Bert pipeline", "[tokenizer][wordpiece]") {
  const json vocab = {{"[UNK]", 0}, {"un", 1},    {"##aff", 2}, {"##able", 3},
                      {"hello", 4}, {"[CLS]", 5}, {"[SEP]", 6}, {"!", 7}};
  const json spec = {{"normalizer", {{"type", "Lowercase"}}},
                     {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
                     {"model",
                      {{"type", "WordPiece"},
                       {"vocab", vocab},
                       {"unk_token", "[UNK]"},
                       {"continuing_subword_prefix", "##"},
                       {"max_input_chars_per_word", 100}}},
                     {"post_processor",
                      {{"type", "BertProcessing"}, {"sep", {"[SEP]", 6}}, {"cls", {"[CLS]", 5}}}},
                     {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
                     {"added_tokens", json::array()}};
  const auto tok = Build(spec);
  CHECK(tok->Encode("Unaffable hello!", false) == std::vector<int32_t>{1, 2, 3, 4, 7});
  CHECK(tok->Encode("Unaffable hello!") == std::vector<int32_t>{5, 1, 2, 3, 4, 7, 6});
  CHECK(tok->EncodePair("hello", "unaffable") == std::vector<int32_t>{5, 4, 6, 1, 2, 3, 6});
  // A word that the vocabulary cannot cover becomes a single [UNK].
  CHECK(tok->Encode("unaffx hello", false) == std::vector<int32_t>{0, 4});
  CHECK(tok->Decode(std::vector<int32_t>{1, 2, 3, 4, 7}) == "unaffable hello!");
}

TEST_CASE("BPE options", "[tokenizer][bpe]") {
  const auto model = [](json extra) {
    json m = {{"type", "BPE"}};
    m.update(extra);
    return Build({{"model", m}});
  };
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}, {"<unk>", 5}};
  // Merges as "a b" strings or as pairs give the same model.
  CHECK(model({{"vocab", vocab}, {"merges", {"a b", "ab c"}}})->Encode("abc") ==
        std::vector<int32_t>{4});
  CHECK(model({{"vocab", vocab},
               {"merges", json::array({json::array({"a", "b"}), json::array({"ab", "c"})})}})
            ->Encode("abc") == std::vector<int32_t>{4});
  // ignore_merges: a word that is itself in the vocabulary skips merging.
  CHECK(model({{"vocab", vocab}, {"merges", {"a b"}}})->Encode("abc") ==
        std::vector<int32_t>{3, 2});
  CHECK(model({{"vocab", vocab}, {"merges", {"a b"}}, {"ignore_merges", true}})->Encode("abc") ==
        std::vector<int32_t>{4});
  // unk_token, with and without fusing consecutive unknowns.
  CHECK(model({{"vocab", vocab}, {"merges", {"a b"}}, {"unk_token", "<unk>"}})->Encode("xxab") ==
        std::vector<int32_t>{5, 5, 3});
  CHECK(model({{"vocab", vocab}, {"merges", {"a b"}}, {"unk_token", "<unk>"}, {"fuse_unk", true}})
            ->Encode("xxab") == std::vector<int32_t>{5, 3});
  // continuing_subword_prefix: non-initial characters carry the prefix, and
  // a merge drops the right side's prefix.
  CHECK(model({{"vocab", {{"a", 0}, {"##b", 1}, {"ab", 2}}},
               {"merges", {"a ##b"}},
               {"continuing_subword_prefix", "##"}})
            ->Encode("ab") == std::vector<int32_t>{2});
  // end_of_word_suffix: the last character carries the suffix.
  CHECK(model({{"vocab", {{"a", 0}, {"b</w>", 1}, {"ab</w>", 2}}},
               {"merges", {"a b</w>"}},
               {"end_of_word_suffix", "</w>"}})
            ->Encode("ab") == std::vector<int32_t>{2});
  // byte_fallback: an unknown character becomes its UTF-8 bytes.
  const auto bf = model({{"vocab", {{"a", 0}, {"<0xC3>", 1}, {"<0xA9>", 2}, {"<unk>", 3}}},
                         {"merges", json::array()},
                         {"byte_fallback", true},
                         {"unk_token", "<unk>"}});
  CHECK(bf->Encode("a\u00e9") == std::vector<int32_t>{0, 1, 2});
  CHECK(bf->Encode("\u4f60") == std::vector<int32_t>{3});  // bytes missing: unk
}

TEST_CASE("added tokens: lstrip, rstrip, single_word, special", "[tokenizer][added]") {
  const auto with_token = [](json token) {
    token["id"] = 100;
    token["content"] = token.value("content", "<m>");
    return Build({{"model", CharBpe()}, {"added_tokens", {token}}});
  };
  using Ids = std::vector<int32_t>;
  // Plain: the token is cut out, surrounding spaces stay text.
  CHECK(with_token({{"special", true}})->Encode("a <m> b") == Ids{1, 0, 100, 0, 2});
  // lstrip swallows the whitespace before the token, rstrip the one after.
  CHECK(with_token({{"special", true}, {"lstrip", true}})->Encode("a  <m> b") == Ids{1, 100, 0, 2});
  CHECK(with_token({{"special", true}, {"rstrip", true}})->Encode("a <m>  b") == Ids{1, 0, 100, 2});
  // single_word: only matches when not inside a word.
  const auto sw = with_token({{"content", "ab"}, {"special", false}, {"single_word", true}});
  CHECK(sw->Encode("ab ab") == Ids{100, 0, 100});
  CHECK(sw->Encode("xab") == Ids{24, 1, 2});
  // Longest match wins among overlapping added tokens of the same kind.
  // (Tokens with normalized=false are matched before normalized ones.)
  const auto two =
      Build({{"model", CharBpe()},
             {"added_tokens",
              {{{"id", 100}, {"content", "<a>"}, {"special", true}},
               {{"id", 101}, {"content", "<a><b>"}, {"special", false}, {"normalized", false}}}}});
  CHECK(two->Encode("x<a><b>y<a>") == Ids{24, 101, 25, 100});
  // skip_special_tokens drops special added tokens only.
  CHECK(two->Decode(Ids{24, 101, 100}, true) == "x <a><b>");
  CHECK(two->Decode(Ids{24, 101, 100}, false) == "x <a><b> <a>");
  CHECK(two->IsSpecial(100));
  CHECK(!two->IsSpecial(101));
  CHECK(two->TokenToId("<a><b>") == std::optional<int32_t>(101));
  CHECK(two->IdToToken(100) == "<a>");
  CHECK(two->VocabSize() == 102);
}
