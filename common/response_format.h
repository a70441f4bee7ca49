// Structured output: the shape a generation's text must take, as OpenAI's
// `response_format` says it ({"type": "text" | "json_object" | "json_schema"}),
// shared by the socket's generate params, the HTTP endpoint and the CLI.
// docs/protocol.md lists the JSON Schema keywords medq enforces; any other is
// refused (INVALID_REQUEST naming it), never ignored.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace medq {

struct ResponseFormat {
  enum class Type {
    kText,        // no constraint
    kJsonObject,  // any JSON object
    kJsonSchema,  // a JSON document valid under `schema`
  };
  Type type = Type::kText;
  std::string name;               // json_schema.name (informational)
  nlohmann::ordered_json schema;  // json_schema.schema (kJsonSchema)
  bool strict = false;            // json_schema.strict: recorded; medq always enforces

  bool constrained() const { return type != Type::kText; }
};

// Reads `value` (the request's response_format). `field` is the name errors
// use for it ("response_format" on the socket and HTTP alike).
// INVALID_REQUEST naming the field or the schema keyword at fault, with its
// JSON Pointer inside the schema.
Result<ResponseFormat> ParseResponseFormat(const nlohmann::ordered_json& value,
                                           const std::string& field);

// The JSON form ParseResponseFormat reads.
nlohmann::ordered_json ToJson(const ResponseFormat& format);

// Checks that every keyword of `schema` is one medq enforces: type object
// (properties, required, additionalProperties false or a schema), array
// (items, minItems, maxItems), string (enum, const, minLength, maxLength,
// pattern, format date / date-time / time / email / uuid...), number and
// integer (minimum, maximum, exclusive bounds), boolean, null, enum, const,
// anyOf, $ref into $defs/definitions, and the annotations (title,
// description, default, examples, $schema, $id, $comment). `where` prefixes
// the error ("response_format.json_schema.schema").
Status CheckSupportedSchema(const nlohmann::ordered_json& schema, const std::string& where);

// Nesting deeper than this is refused (a schema is compiled on the worker).
inline constexpr int kMaxSchemaDepth = 32;

}  // namespace medq
