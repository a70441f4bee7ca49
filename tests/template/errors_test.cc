// Errors: every template error comes back as kInvalidRequest with the line
// and column where it happened; broken or hostile templates never crash,
// recurse without bound, or grow output without limit.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <string>

#include "daemon/template/chat_template.h"
#include "tests/support/fixtures.h"

namespace {

using medq::chat::ChatTemplate;
using medq::chat::TemplateInputs;

// The error message of parsing or rendering `source`; "" when it succeeds.
std::string ErrorOf(const std::string& source,
                    const nlohmann::ordered_json& vars = nlohmann::ordered_json::object()) {
  auto t = ChatTemplate::FromSource(source, {});
  if (!t.ok()) {
    CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
    return t.error().message;
  }
  TemplateInputs in;
  in.extra = vars;
  auto out = t->Render(in);
  if (out.ok()) return "";
  CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
  return out.error().message;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("syntax errors report line and column", "[template][errors]") {
  // `{% if %}` on line 2: the condition is missing where `%}` stands (column 7).
  std::string e = ErrorOf("line one\n{% if %}x{% endif %}");
  CHECK(Contains(e, "line 2, column 7"));
  CHECK(Contains(e, "expected an expression"));

  e = ErrorOf("ok\n\n  {{ 'abc }}");
  CHECK(Contains(e, "line 3, column 6"));
  CHECK(Contains(e, "unterminated string"));

  e = ErrorOf("{% for x in y %}\nbody");
  CHECK(Contains(e, "line 2"));
  CHECK(Contains(e, "endfor"));

  e = ErrorOf("{% if x %}\n{% endfor %}");
  CHECK(Contains(e, "line 2, column 4"));
  CHECK(Contains(e, "'endfor'"));
  CHECK(Contains(e, "expects 'elif' or 'else' or 'endif'"));

  e = ErrorOf("{% frobnicate %}");
  CHECK(Contains(e, "line 1, column 4"));
  CHECK(Contains(e, "frobnicate"));

  e = ErrorOf("a {# never closed");
  CHECK(Contains(e, "line 1, column 3"));
  CHECK(Contains(e, "comment"));

  e = ErrorOf("{{ (1 + 2 }}");
  CHECK(Contains(e, "line 1"));

  e = ErrorOf("{{ 1 }");
  INFO(e);
  CHECK(Contains(e, "unexpected '}'"));
}

TEST_CASE("runtime errors report line and column", "[template][errors]") {
  std::string e = ErrorOf("{% for m in messages %}\n  {{ m.content + 1 }}\n{% endfor %}",
                          {{"messages", {{{"content", "x"}}}}});
  CHECK(Contains(e, "line 2, column 16"));
  CHECK(Contains(e, "can only concatenate str"));

  e = ErrorOf("x\n{{ 1 | nosuch }}");
  CHECK(Contains(e, "line 2, column 8"));
  CHECK(Contains(e, "no filter named 'nosuch'"));

  e = ErrorOf("{{ 1 is nosuch }}");
  CHECK(Contains(e, "no test named 'nosuch'"));

  e = ErrorOf("{{ missing.attr }}");
  CHECK(Contains(e, "'missing' is undefined"));

  e = ErrorOf("{{ 1 // 0 }}");
  CHECK(Contains(e, "by zero"));
}

TEST_CASE("raise_exception becomes an error carrying its message", "[template][errors]") {
  const std::string src =
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('Conversation roles must be user or assistant') }}"
      "{% endif %}{% endfor %}ok";
  CHECK(ErrorOf(src, {{"messages", {{{"role", "user"}}}}}).empty());
  const std::string e = ErrorOf(src, {{"messages", {{{"role", "system"}}}}});
  CHECK(Contains(e, "Conversation roles must be user or assistant"));
  CHECK(Contains(e, "line 1"));
}

TEST_CASE("deep nesting is refused, not a stack overflow", "[template][errors][limits]") {
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  CHECK(Contains(ErrorOf(parens), "nested too deeply"));

  std::string lists = "{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}";
  CHECK(Contains(ErrorOf(lists), "nested too deeply"));

  std::string ifs;
  for (int i = 0; i < 5000; ++i)
    ifs += "{% if true %}";
  CHECK(Contains(ErrorOf(ifs), "nested too deeply"));

  std::string nots = "{{ " + std::string(0, ' ');
  for (int i = 0; i < 50000; ++i)
    nots += "not ";
  CHECK(Contains(ErrorOf(nots + "1 }}"), "nested too deeply"));

  std::string negs = "{{ " + std::string(50000, '-') + "1 }}";
  CHECK(Contains(ErrorOf(negs), "nested too deeply"));

  // Moderate nesting, as real templates have, still works (Jinja2 gives 1).
  std::string ok = "{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}";
  CHECK(ErrorOf(ok).empty());
}

TEST_CASE("runaway recursion, loops and output are bounded", "[template][errors][limits]") {
  CHECK(Contains(ErrorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
                 "macro calls nested"));
  // Each of up to 128 macro levels evaluating a deeply nested expression:
  // the evaluator's total depth is capped before the stack runs out.
  const std::string deep = std::string(40, '(') + "f(n + 1)" + std::string(40, ')');
  CHECK(Contains(ErrorOf("{% macro f(n) %}{{ " + deep + " }}{% endmacro %}{{ f(0) }}"),
                 "nested more than"));
  CHECK(Contains(ErrorOf("{{ range(1000000)|length }}"), "range() too big"));
  CHECK(Contains(ErrorOf("{% for i in range(100000) %}{% for j in range(100000) %}"
                         "{% endfor %}{% endfor %}"),
                 "loop iterations"));
  CHECK(Contains(ErrorOf("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                         "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                 "exceeds"));
  CHECK(Contains(ErrorOf("{{ 'x' * 100000000000 }}"), "exceeds"));
  CHECK(Contains(ErrorOf("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}"), "exceeds"));
  // A namespace that contains itself cannot be printed or serialized forever.
  CHECK(Contains(ErrorOf("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"),
                 "nested too deeply"));
  CHECK(Contains(ErrorOf("{% set ns = namespace() %}{% set ns.l = [ns] %}{{ ns.l|tojson }}"),
                 "not JSON serializable"));
}

TEST_CASE("deeply nested input JSON is refused", "[template][errors][limits]") {
  auto t = ChatTemplate::FromSource("{{ messages|length }}", {});
  REQUIRE(t.ok());
  nlohmann::ordered_json deep = "leaf";
  for (int i = 0; i < 1000; ++i)
    deep = nlohmann::ordered_json::array({deep});
  TemplateInputs in;
  in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", deep}}});
  auto out = t->Render(in);
  REQUIRE_FALSE(out.ok());
  CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
  CHECK(Contains(out.error().message, "nested deeper"));
}

TEST_CASE("every prefix of a real template fails cleanly or renders", "[template][errors]") {
  // Cutting the qwen3 template at every byte yields unterminated tags,
  // strings and blocks of every kind; none may crash.
  std::ifstream in(medq::test::TokenizerFixture("qwen3") / "tokenizer_config.json");
  REQUIRE(in.good());
  const auto config = nlohmann::json::parse(in);
  const std::string full = config.at("chat_template").get<std::string>();
  TemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"u"},)"
      R"({"role":"assistant","content":"<think>r</think>a","tool_calls":[)"
      R"({"function":{"name":"f","arguments":{"x":1}}}]},{"role":"tool","content":"t"}])");
  int parsed = 0;
  int failed = 0;
  for (size_t n = 0; n <= full.size(); ++n) {
    auto t = ChatTemplate::FromSource(full.substr(0, n), {});
    if (!t.ok()) {
      ++failed;
      CHECK(Contains(t.error().message, "line "));
      continue;
    }
    ++parsed;
    auto out = t->Render(inputs);
    if (!out.ok()) CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
  }
  CHECK(parsed > 0);
  CHECK(failed > 0);
}

TEST_CASE("garbage input never crashes", "[template][errors]") {
  const std::string samples[] = {
      "{%",
      "{{",
      "{#",
      "{%-",
      "{{-",
      "{% %}",
      "{{ }}",
      "{% if",
      "{% if x %}{% else %}{% else %}",
      "{% endif %}",
      "{% endfor %}",
      "{% for %}",
      "{% for x in %}",
      "{% set %}",
      "{% set x %}",
      "{% macro %}",
      "{% macro m( %}",
      "{{ x[ }}",
      "{{ x[1:2:3:4] }}",
      "{{ x. }}",
      "{{ x | }}",
      "{{ x is }}",
      "{{ 'a' if }}",
      "{{ {1: } }}",
      "{{ ) }}",
      "{{ ] }}",
      "{{ } }}",
      "{{ @ }}",
      "{{ 99999999999999999999999 }}",
      "{{ '\\x' }}",
      "{{ '\\u12' }}",
      "{% raw %}never ends",
      "\xff\xfe{{ '\xc3' }}",
      "{% break %}",
      "{% continue %}",
      "{{ loop.index }}",
      "{{ (1, 2)(3) }}",
      "{{ range(1, 2, 0) }}",
      "{{ -9223372036854775807 - 2 }}",
      "{{ 9223372036854775807 + 1 }}",
      "{{ 2 ** 64 }}",
      "{{ [][0] }}{{ ''[5] }}",
      "{{ 'x'[1:'a'] }}",
      "{{ {}.get() }}",
      "{{ ''.split('') }}",
      "{{ '{'.format(1) }}",
      "{{ '{5}'.format(1) }}",
      "{{ 1|indent('x', 'y') }}",
      "{{ x|map }}",
      "{{ [1, 'a']|sort }}",
  };
  for (const std::string& s : samples) {
    INFO(s);
    auto t = ChatTemplate::FromSource(s, {});
    if (!t.ok()) {
      CHECK(t.error().code == medq::ErrorCode::kInvalidRequest);
      continue;
    }
    auto out = t->Render({});
    if (!out.ok()) CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
  }
}

TEST_CASE("random mutations of real templates never crash", "[template][errors]") {
  // Seeded byte-level mutations (replace with template punctuation, delete,
  // duplicate a span) of every fixture chat template; each result must parse
  // and render or fail with kInvalidRequest.
  std::mt19937 rng(4242);
  const std::string alphabet = "{}%#-+()[]'\"\\ \n|.~,:=*/<>!abcxyz019";
  TemplateInputs inputs;
  inputs.messages = nlohmann::ordered_json::parse(
      R"([{"role":"system","content":"s"},{"role":"user","content":"u"},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"type":"function",)"
      R"("function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"t"}])");
  int mutated = 0;
  for (const char* name : {"llama3", "qwen3", "deepseek_v3"}) {
    std::ifstream in(medq::test::TokenizerFixture(name) / "tokenizer_config.json");
    REQUIRE(in.good());
    const std::string original = nlohmann::json::parse(in).at("chat_template").get<std::string>();
    for (int round = 0; round < 300; ++round) {
      std::string t = original;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !t.empty(); ++e) {
        const size_t at = rng() % t.size();
        switch (rng() % 3) {
          case 0:
            t[at] = alphabet[rng() % alphabet.size()];
            break;
          case 1:
            t.erase(at, 1 + rng() % 8);
            break;
          default:
            t.insert(at, t.substr(at, 1 + rng() % 16));
        }
      }
      ++mutated;
      auto parsed = ChatTemplate::FromSource(t, {});
      if (!parsed.ok()) {
        CHECK(parsed.error().code == medq::ErrorCode::kInvalidRequest);
        continue;
      }
      auto out = parsed->Render(inputs);
      if (!out.ok()) CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
    }
  }
  CHECK(mutated == 900);
}
