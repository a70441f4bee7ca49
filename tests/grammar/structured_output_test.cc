// Structured output against real vocabularies (the fixture tokenizers): a
// walk that picks tokens at random among those the constraint allows always
// spells a document that parses and keeps the schema, whatever the
// tokenizer's byte encoding (byte-level BPE, SentencePiece byte fallback).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/grammar/structured_output.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/support/fixtures.h"

using medq::ResponseFormat;
using medq::grammar::StructuredOutput;
using medq::tokenizer::Tokenizer;
using Json = nlohmann::ordered_json;

namespace {

struct Walk {
  std::string text;
  bool stopped = false;
  int steps = 0;
};

bool Allowed(const std::vector<int32_t>& words, int32_t id) {
  return ((static_cast<uint32_t>(words[static_cast<size_t>(id / 32)]) >> (id % 32)) & 1u) != 0;
}

// Random tokens among the allowed ones (a stop token as soon as one is
// allowed), spelled with TokenBytes, as a model's draws would be.
Walk RandomWalk(const Tokenizer& tok, StructuredOutput& so, const ResponseFormat& format,
                int64_t vocab, int32_t stop, uint64_t seed, int max_steps = 600) {
  auto constraint = so.Constrain(format);
  REQUIRE(constraint.ok());
  REQUIRE(*constraint != nullptr);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> words;
  Walk walk;
  for (; walk.steps < max_steps; ++walk.steps) {
    words.assign(static_cast<size_t>((vocab + 31) / 32), 0);
    (*constraint)->FillAllowed(words);
    if (Allowed(words, stop)) {
      (*constraint)->Accept(stop);
      walk.stopped = true;
      break;
    }
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < vocab; ++id) {
      if (Allowed(words, id)) ids.push_back(id);
    }
    REQUIRE(!ids.empty());
    for (const int32_t id : ids)
      REQUIRE_FALSE(tok.IsSpecial(id));
    const int32_t id = ids[rng() % ids.size()];
    (*constraint)->Accept(id);
    walk.text += tok.TokenBytes(id).value_or("");
  }
  return walk;
}

size_t CodePoints(const std::string& s) {
  return static_cast<size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

ResponseFormat SchemaFormat(const std::string& schema) {
  ResponseFormat f;
  f.type = ResponseFormat::Type::kJsonSchema;
  f.schema = Json::parse(schema);
  return f;
}

// A fixture tokenizer, and structured output for a model with its
// vocabulary (`extra_rows` padded rows past its ids), its eos the stop token.
struct Setup {
  std::unique_ptr<Tokenizer> tok;
  int64_t vocab = 0;
  int32_t stop = 0;
  std::unique_ptr<StructuredOutput> so;
};

Setup Load(const char* name, int64_t extra_rows = 0) {
  Setup s;
  auto tok = Tokenizer::FromModelDir(medq::test::TokenizerFixture(name));
  REQUIRE(tok.ok());
  s.tok = std::move(*tok);
  s.vocab = static_cast<int64_t>(s.tok->VocabSize()) + extra_rows;
  s.stop = *s.tok->EosId();
  auto so = StructuredOutput::Create(*s.tok, s.vocab, {s.stop});
  REQUIRE(so.ok());
  s.so = std::move(*so);
  return s;
}

}  // namespace

TEST_CASE("random walks under a schema spell valid documents", "[grammar]") {
  for (const char* name : {"qwen3", "llama3", "mistral_v1"}) {
    INFO("tokenizer " << name);
    const Setup s = Load(name);

    const ResponseFormat format = SchemaFormat(R"({
      "type": "object",
      "properties": {
        "name": {"type": "string", "maxLength": 6},
        "sex": {"enum": ["f", "m", "x"]},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2},
        "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 4}]}
      },
      "required": ["name", "sex", "age", "ok", "tags", "note"],
      "additionalProperties": false
    })");
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const Walk walk = RandomWalk(*s.tok, *s.so, format, s.vocab, s.stop, seed);
      INFO("seed " << seed << " text " << walk.text);
      REQUIRE(walk.stopped);
      const Json doc = Json::parse(walk.text);  // throws (fails) when not JSON
      REQUIRE(doc.is_object());
      CHECK(doc.size() == 6);
      CHECK(CodePoints(doc.at("name").get<std::string>()) <= 6);
      const std::string sex = doc.at("sex").get<std::string>();
      CHECK((sex == "f" || sex == "m" || sex == "x"));
      CHECK(doc.at("age").is_number_integer());
      CHECK(doc.at("age").get<int64_t>() >= 0);
      CHECK(doc.at("age").get<int64_t>() <= 120);
      CHECK(doc.at("ok").is_boolean());
      CHECK(doc.at("tags").is_array());
      CHECK(doc.at("tags").size() <= 2);
      CHECK((doc.at("note").is_null() || doc.at("note").is_string()));
    }
  }
}

TEST_CASE("a json_object format allows only an object", "[grammar]") {
  const Setup s = Load("qwen3");
  ResponseFormat f;
  f.type = ResponseFormat::Type::kJsonObject;
  auto constraint = s.so->Constrain(f);
  REQUIRE(constraint.ok());
  std::vector<int32_t> words(static_cast<size_t>((s.vocab + 31) / 32));
  (*constraint)->FillAllowed(words);
  // The first token opens the object: "{" allowed, a letter, "[" and the
  // s.stop token not.
  CHECK(Allowed(words, *s.tok->TokenToId("{")));
  CHECK_FALSE(Allowed(words, *s.tok->TokenToId("[")));
  CHECK_FALSE(Allowed(words, *s.tok->TokenToId("a")));
  CHECK_FALSE(Allowed(words, s.stop));
}

TEST_CASE("a text format gives no constraint, a model's padded rows are never allowed",
          "[grammar]") {
  const Setup s = Load("llama3", 64);  // 64 padded rows
  auto none = s.so->Constrain(ResponseFormat{});
  REQUIRE(none.ok());
  CHECK(*none == nullptr);
  const Walk walk =
      RandomWalk(*s.tok, *s.so, SchemaFormat(R"({"type": "boolean"})"), s.vocab, s.stop, 7);
  REQUIRE(walk.stopped);
  CHECK((walk.text == "true" || walk.text == "false"));
}

TEST_CASE("past its s.stop token a constraint allows only s.stop tokens", "[grammar]") {
  const Setup s = Load("qwen3");
  auto c = s.so->Constrain(SchemaFormat(R"({"const": 1})"));
  REQUIRE(c.ok());
  (*c)->Accept(*s.tok->TokenToId("1"));
  std::vector<int32_t> words(static_cast<size_t>((s.vocab + 31) / 32));
  (*c)->FillAllowed(words);
  CHECK(Allowed(words, s.stop));
  (*c)->Accept(s.stop);
  for (int i = 0; i < 2; ++i) {  // a caller that goes on: no throw, only stops
    std::fill(words.begin(), words.end(), -1);
    (*c)->FillAllowed(words);
    int count = 0;
    for (int32_t id = 0; id < s.vocab; ++id)
      count += Allowed(words, id) ? 1 : 0;
    CHECK(count == 1);
    CHECK(Allowed(words, s.stop));
    (*c)->Accept(s.stop);
  }
}

TEST_CASE("a schema the grammar engine cannot build is INVALID_REQUEST", "[grammar]") {
  const Setup s = Load("qwen3");
  auto bad = s.so->Constrain(SchemaFormat(R"({"type": "string", "pattern": "(unclosed"})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == medq::ErrorCode::kInvalidRequest);
  CHECK_THAT(bad.error().message, Catch::Contains("params.response_format"));
}

// Patterns the grammar engine once enforced loosely (an optional group that
// ends in a repetition matched the repetition alone: "(a[0-9]+)?Z" took
// "2Z"; scripts/setup-xgrammar fixes it), and the calendar formats, which
// medq enforces as real dates and times.
TEST_CASE("patterns and calendar formats are enforced exactly", "[grammar]") {
  const Setup s = Load("qwen3");
  const std::string date =
      "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
      "02-(0[1-9]|1[0-9]|2[0-8]))|[0-9]{2}(0[48]|[2468][048]|[13579][26])-02-29|"
      "(0[48]|[2468][048]|[13579][26])00-02-29)";
  const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]"
      ")";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type": "string", "pattern": "^(a[0-9]+)?Z$"})", "(a[0-9]+)?Z"},
      {R"({"type": "string", "pattern": "^[0-5][0-9]([.][0-9]{1,2})?Z$"})",
       "[0-5][0-9]([.][0-9]{1,2})?Z"},
      {R"({"type": "string", "pattern": "^(ab|c)*d?$"})", "(ab|c)*d?"},
      {R"({"type": "string", "format": "date"})", date},
      {R"({"type": "string", "format": "time"})", time},
      {R"({"type": "string", "format": "date-time"})", date + "T" + time},
  };
  for (const auto& [schema, pattern] : cases) {
    INFO("schema " << schema);
    const std::regex whole(pattern);
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      const Walk walk = RandomWalk(*s.tok, *s.so, SchemaFormat(schema), s.vocab, s.stop, seed, 200);
      INFO("seed " << seed << " text " << walk.text);
      REQUIRE(walk.stopped);
      const std::string value = Json::parse(walk.text).get<std::string>();
      CHECK(std::regex_match(value, whole));
      // The first date of the year 0 and February 30 never come out.
      CHECK(value.rfind("0000-", 0) != 0);
      CHECK(value.find("-02-30") == std::string::npos);
    }
  }
}
