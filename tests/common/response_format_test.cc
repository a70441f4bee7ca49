// response_format: what the socket and HTTP accept, and every JSON Schema
// keyword medq does not enforce refused by name (never ignored).
#include <catch2/catch.hpp>

#include <string>

#include "common/generate_params.h"
#include "common/response_format.h"

using medq::ErrorCode;
using medq::ParseResponseFormat;
using medq::ResponseFormat;
using Json = nlohmann::ordered_json;

namespace {

Json WithSchema(const Json& schema) {
  return {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}};
}

std::string RefusalOf(const Json& schema) {
  auto f = ParseResponseFormat(WithSchema(schema), "response_format");
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == ErrorCode::kInvalidRequest);
  return f.error().message;
}

}  // namespace

TEST_CASE("response_format types", "[common][response_format]") {
  auto text = ParseResponseFormat({{"type", "text"}}, "response_format");
  REQUIRE(text.ok());
  CHECK_FALSE(text->constrained());
  auto object = ParseResponseFormat({{"type", "json_object"}}, "response_format");
  REQUIRE(object.ok());
  CHECK(object->type == ResponseFormat::Type::kJsonObject);

  const Json schema = {{"type", "object"},
                       {"properties", {{"a", {{"type", "string"}}}}},
                       {"required", {"a"}},
                       {"additionalProperties", false}};
  Json full = WithSchema(schema);
  full["json_schema"]["strict"] = true;
  auto parsed = ParseResponseFormat(full, "response_format");
  REQUIRE(parsed.ok());
  CHECK(parsed->type == ResponseFormat::Type::kJsonSchema);
  CHECK(parsed->name == "x");
  CHECK(parsed->strict);
  CHECK(parsed->schema == schema);
  CHECK(medq::ToJson(*parsed) == full);  // the JSON form round-trips
}

TEST_CASE("response_format refuses malformed values naming the field",
          "[common][response_format]") {
  const auto message = [](const Json& v) {
    auto f = ParseResponseFormat(v, "response_format");
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code == ErrorCode::kInvalidRequest);
    return f.error().message;
  };
  CHECK_THAT(message("json"), Catch::Contains("response_format must be an object"));
  CHECK_THAT(message({{"type", "yaml"}}), Catch::Contains("response_format.type"));
  CHECK_THAT(message({{"type", 3}}), Catch::Contains("response_format.type"));
  CHECK_THAT(message({{"type", "json_object"}, {"schema", Json::object()}}),
             Catch::Contains("response_format.schema"));
  CHECK_THAT(message({{"type", "json_schema"}}), Catch::Contains("response_format.json_schema"));
  CHECK_THAT(message({{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}),
             Catch::Contains("response_format.json_schema.schema"));
  CHECK_THAT(message({{"type", "json_schema"},
                      {"json_schema", {{"schema", Json::object()}, {"strict", "yes"}}}}),
             Catch::Contains("response_format.json_schema.strict"));
  CHECK_THAT(message({{"type", "json_schema"},
                      {"json_schema", {{"schema", Json::object()}, {"extra", 1}}}}),
             Catch::Contains("response_format.json_schema.extra"));
}

TEST_CASE("every supported JSON Schema keyword is accepted", "[common][response_format]") {
  const Json schema = Json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Note", "description": "fields of a clinical note",
    "type": "object",
    "properties": {
      "name": {"type": "string", "minLength": 1, "maxLength": 40},
      "code": {"type": "string", "pattern": "^[A-Z][0-9]{2}$"},
      "seen": {"type": "string", "format": "date"},
      "at": {"type": "string", "format": "date-time"},
      "sex": {"enum": ["f", "m", "x"]},
      "kind": {"const": "note"},
      "age": {"type": "integer", "minimum": 0, "maximum": 130},
      "dose": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 10.5},
      "ok": {"type": "boolean"},
      "none": {"type": "null"},
      "maybe": {"type": ["string", "null"]},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
      "either": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/drug"}]},
      "old": {"$ref": "#/definitions/legacy"}
    },
    "required": ["name", "age"],
    "additionalProperties": false,
    "$defs": {"drug": {"type": "object", "properties": {"n": {"type": "string"}},
                       "additionalProperties": false}},
    "definitions": {"legacy": {"type": "integer", "default": 1, "examples": [1]}}
  })");
  auto f = ParseResponseFormat(WithSchema(schema), "response_format");
  INFO((f.ok() ? std::string() : f.error().message));
  CHECK(f.ok());
}

TEST_CASE("unsupported JSON Schema keywords are refused by name and place",
          "[common][response_format]") {
  CHECK_THAT(RefusalOf({{"oneOf", Json::array({Json::object()})}}), Catch::Contains("\"oneOf\""));
  CHECK_THAT(RefusalOf({{"allOf", Json::array({Json::object()})}}), Catch::Contains("\"allOf\""));
  CHECK_THAT(RefusalOf({{"type", "array"}, {"uniqueItems", true}}),
             Catch::Contains("\"uniqueItems\""));
  CHECK_THAT(RefusalOf({{"type", "integer"}, {"multipleOf", 3}}),
             Catch::Contains("\"multipleOf\""));
  const std::string nested = RefusalOf(
      {{"type", "object"},
       {"properties", {{"a/b", {{"type", "object"}, {"patternProperties", Json::object()}}}}}});
  CHECK_THAT(nested, Catch::Contains("\"patternProperties\""));
  CHECK_THAT(nested, Catch::Contains("/properties/a~1b"));
  CHECK_THAT(RefusalOf({{"type", "string"}, {"format", "ipv6"}}), Catch::Contains("format"));
  CHECK_THAT(RefusalOf({{"type", "text"}}), Catch::Contains("type"));
  CHECK_THAT(RefusalOf({{"$ref", "#/$defs/missing"}}), Catch::Contains("names no definition"));
  CHECK_THAT(RefusalOf({{"$ref", "https://example.org/s.json"}}), Catch::Contains("$ref"));
  CHECK_THAT(RefusalOf({{"type", "string"}, {"maxLength", -1}}), Catch::Contains("maxLength"));
  CHECK_THAT(RefusalOf({{"enum", Json::array()}}), Catch::Contains("enum"));
  CHECK_THAT(RefusalOf({{"type", "string"}, {"pattern", "^a+$"}, {"maxLength", 3}}),
             Catch::Contains("cannot enforce together"));
  CHECK_THAT(RefusalOf({{"type", "string"}, {"format", "date"}, {"minLength", 3}}),
             Catch::Contains("cannot enforce together"));
  CHECK_THAT(RefusalOf({{"required", "a"}}), Catch::Contains("required"));

  Json deep = {{"type", "string"}};
  for (int i = 0; i < medq::kMaxSchemaDepth + 2; ++i)
    deep = {{"type", "array"}, {"items", deep}};
  CHECK_THAT(RefusalOf(deep), Catch::Contains("nests deeper"));
}

TEST_CASE("generate params carry response_format", "[common][response_format]") {
  Json params = {{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}};
  auto g = medq::ParseGenerateParams(params);
  REQUIRE(g.ok());
  CHECK(g->response_format.type == ResponseFormat::Type::kJsonObject);
  CHECK(medq::ToJson(*g) == params);

  params["response_format"] = WithSchema({{"type", "object"}, {"if", Json::object()}});
  auto refused = medq::ParseGenerateParams(params);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("params.response_format"));
  CHECK_THAT(refused.error().message, Catch::Contains("\"if\""));
}
