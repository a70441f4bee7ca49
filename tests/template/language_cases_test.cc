// The language table: data/language_cases.jsonl holds template snippets with
// the output Python Jinja2 3.1 gives for them (or that it raises), produced by
// make_language_cases.py with Jinja2 configured as transformers configures it.
// data/whitespace_cases.jsonl (make_whitespace_cases.py) does the same for
// seeded random mixes of tags, whitespace-control markers and whitespace, and
// data/expression_cases.jsonl (make_expression_cases.py) for random
// expressions.
// Each row is rendered here with the row's `vars` as template variables.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "daemon/template/chat_template.h"

namespace {

using medq::chat::ChatTemplate;
using medq::chat::TemplateInputs;

// Renders every row of data/<file> and compares with Jinja2's result.
void CheckCaseFile(const std::string& file) {
  std::ifstream in(std::string(MEDQ_TEMPLATE_TEST_DATA) + "/" + file);
  REQUIRE(in.good());
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++rows;
    const auto row = nlohmann::ordered_json::parse(line);
    const std::string name = row.at("name").get<std::string>();
    const std::string source = row.at("template").get<std::string>();
    INFO("case '" << name << "': " << source);
    auto tmpl = ChatTemplate::FromSource(source, {});
    TemplateInputs inputs;
    inputs.extra = row.at("vars");
    const bool want_error = row.value("error", false);
    if (!tmpl.ok()) {
      INFO("parse error: " << tmpl.error().message);
      CHECK(want_error);
      CHECK(tmpl.error().code == medq::ErrorCode::kInvalidRequest);
      continue;
    }
    const auto out = tmpl->Render(inputs);
    if (want_error) {
      INFO("rendered instead: " << (out.ok() ? *out : std::string()));
      CHECK_FALSE(out.ok());
      if (!out.ok()) {
        CHECK(out.error().code == medq::ErrorCode::kInvalidRequest);
        // Every error names where in the template it happened.
        CHECK(out.error().message.find(" at line ") != std::string::npos);
      }
      continue;
    }
    INFO("error: " << (out.ok() ? std::string() : out.error().message));
    CHECK(out.ok());
    if (out.ok()) CHECK(*out == row.at("expected").get<std::string>());
  }
  CHECK(rows > 100);
}

}  // namespace

TEST_CASE("language cases match Python Jinja2", "[template][language]") {
  CheckCaseFile("language_cases.jsonl");
}

TEST_CASE("whitespace control matches Python Jinja2", "[template][language][whitespace]") {
  CheckCaseFile("whitespace_cases.jsonl");
}

TEST_CASE("random expressions match Python Jinja2", "[template][language][expressions]") {
  CheckCaseFile("expression_cases.jsonl");
}
