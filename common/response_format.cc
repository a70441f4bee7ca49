#include "common/response_format.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "common/error.h"

namespace medq {
namespace {

using Json = nlohmann::ordered_json;

template <size_t N>
bool OneOf(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Keywords that only describe, wherever they appear.
constexpr std::array<std::string_view, 10> kAnnotations = {
    "title", "description", "default",  "examples",  "$schema",
    "$id",   "$comment",    "readOnly", "writeOnly", "deprecated"};
// Keywords of any schema.
constexpr std::array<std::string_view, 7> kGeneral = {"type", "enum",  "const",      "anyOf",
                                                      "$ref", "$defs", "definitions"};
constexpr std::array<std::string_view, 3> kObject = {"properties", "required",
                                                     "additionalProperties"};
constexpr std::array<std::string_view, 3> kArray = {"items", "minItems", "maxItems"};
constexpr std::array<std::string_view, 4> kString = {"minLength", "maxLength", "pattern", "format"};
constexpr std::array<std::string_view, 4> kNumber = {"minimum", "maximum", "exclusiveMinimum",
                                                     "exclusiveMaximum"};
constexpr std::array<std::string_view, 7> kTypes = {"object",  "array",   "string", "number",
                                                    "integer", "boolean", "null"};
// The formats the grammar enforces (xgrammar's own list).
constexpr std::array<std::string_view, 9> kFormats = {
    "date", "date-time", "time", "duration", "email", "hostname", "ipv4", "uuid", "uri"};

std::string Pointer(const std::string& at, std::string_view key) {
  std::string escaped;
  for (const char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return at + "/" + escaped;
}

class SchemaChecker {
 public:
  SchemaChecker(const Json& root, std::string where) : root_(root), where_(std::move(where)) {}

  Status Check(const Json& schema, const std::string& at, int depth) {
    const std::string here = where_ + (at.empty() ? "" : " at " + at);
    if (depth > kMaxSchemaDepth) {
      return InvalidAt(here, "nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
    }
    if (schema.is_boolean()) return Status::Ok();
    if (!schema.is_object()) return InvalidAt(here, "must be an object or a boolean");
    for (const auto& [key, value] : schema.items()) {
      if (OneOf(key, kAnnotations) || OneOf(key, kGeneral) || OneOf(key, kObject) ||
          OneOf(key, kArray) || OneOf(key, kString) || OneOf(key, kNumber)) {
        continue;
      }
      return InvalidAt(here, "uses the JSON Schema keyword \"" + key +
                                 "\", which medq does not enforce (docs/protocol.md lists those "
                                 "it does)");
    }
    if (auto it = schema.find("type"); it != schema.end()) {
      const auto known = [](const Json& t) {
        return t.is_string() && OneOf(t.get_ref<const std::string&>(), kTypes);
      };
      bool ok = known(*it);
      if (it->is_array()) ok = !it->empty() && std::all_of(it->begin(), it->end(), known);
      if (!ok)
        return InvalidAt(Pointer(here, "type"), "must be a JSON Schema type or a list of them");
    }
    if (auto it = schema.find("enum"); it != schema.end() && (!it->is_array() || it->empty())) {
      return InvalidAt(Pointer(here, "enum"), "must be a non-empty array");
    }
    if (auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array() ||
          !std::all_of(it->begin(), it->end(), [](const Json& r) { return r.is_string(); })) {
        return InvalidAt(Pointer(here, "required"), "must be an array of strings");
      }
    }
    for (const char* key : {"minItems", "maxItems", "minLength", "maxLength"}) {
      if (auto it = schema.find(key);
          it != schema.end() &&
          (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))) {
        return InvalidAt(Pointer(here, key), "must be a non-negative integer");
      }
    }
    for (const auto& key : kNumber) {
      if (auto it = schema.find(key); it != schema.end() && !it->is_number()) {
        return InvalidAt(Pointer(here, key), "must be a number");
      }
    }
    if (auto it = schema.find("pattern"); it != schema.end() && !it->is_string()) {
      return InvalidAt(Pointer(here, "pattern"), "must be a string (a regular expression)");
    }
    if (auto it = schema.find("format"); it != schema.end()) {
      if (!it->is_string() || !OneOf(it->get_ref<const std::string&>(), kFormats)) {
        return InvalidAt(Pointer(here, "format"),
                         "must be one of date, date-time, time, duration, email, hostname, ipv4, "
                         "uuid, uri");
      }
    }
    // The grammar takes a string's form from its pattern or format alone.
    if ((schema.contains("pattern") || schema.contains("format")) &&
        (schema.contains("minLength") || schema.contains("maxLength"))) {
      return InvalidAt(here,
                       "combines minLength/maxLength with a pattern or format, which medq "
                       "cannot enforce together (write the length into the pattern)");
    }
    if (auto it = schema.find("$ref"); it != schema.end()) {
      if (Status s = CheckRef(*it, Pointer(here, "$ref")); !s.ok()) return s;
    }
    if (auto it = schema.find("properties"); it != schema.end()) {
      if (!it->is_object()) return InvalidAt(Pointer(here, "properties"), "must be an object");
      for (const auto& [name, sub] : it->items()) {
        if (Status s = Check(sub, Pointer(Pointer(at, "properties"), name), depth + 1); !s.ok()) {
          return s;
        }
      }
    }
    for (const char* key : {"additionalProperties", "items"}) {
      if (auto it = schema.find(key); it != schema.end()) {
        if (Status s = Check(*it, Pointer(at, key), depth + 1); !s.ok()) return s;
      }
    }
    if (auto it = schema.find("anyOf"); it != schema.end()) {
      if (!it->is_array() || it->empty()) {
        return InvalidAt(Pointer(here, "anyOf"), "must be a non-empty array of schemas");
      }
      for (size_t i = 0; i < it->size(); ++i) {
        if (Status s = Check((*it)[i], Pointer(Pointer(at, "anyOf"), std::to_string(i)), depth + 1);
            !s.ok()) {
          return s;
        }
      }
    }
    for (const char* key : {"$defs", "definitions"}) {
      if (auto it = schema.find(key); it != schema.end()) {
        if (!it->is_object()) return InvalidAt(Pointer(here, key), "must be an object");
        for (const auto& [name, sub] : it->items()) {
          if (Status s = Check(sub, Pointer(Pointer(at, key), name), depth + 1); !s.ok()) return s;
        }
      }
    }
    return Status::Ok();
  }

 private:
  // "#" or a JSON Pointer into the root's $defs / definitions that exists.
  Status CheckRef(const Json& ref, const std::string& here) {
    if (!ref.is_string()) return InvalidAt(here, "must be a string");
    const std::string& r = ref.get_ref<const std::string&>();
    if (r == "#") return Status::Ok();
    for (const std::string prefix : {"#/$defs/", "#/definitions/"}) {
      if (r.rfind(prefix, 0) != 0) continue;
      const std::string name = r.substr(prefix.size());
      const Json& defs = root_.value(prefix.substr(2, prefix.size() - 3), Json::object());
      if (name.find('/') == std::string::npos && defs.is_object() && defs.contains(name)) {
        return Status::Ok();
      }
      return InvalidAt(here, "\"" + r + "\" names no definition in the schema");
    }
    return InvalidAt(here, "must be \"#\" or point into the schema's $defs (\"#/$defs/NAME\")");
  }

  const Json& root_;
  std::string where_;
};

}  // namespace

Status CheckSupportedSchema(const Json& schema, const std::string& where) {
  return SchemaChecker(schema, where).Check(schema, "", 0);
}

Result<ResponseFormat> ParseResponseFormat(const Json& value, const std::string& field) {
  if (!value.is_object()) return InvalidAt(field, "must be an object");
  const auto type = value.find("type");
  if (type == value.end() || !type->is_string()) {
    return InvalidAt(field + ".type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  ResponseFormat f;
  const std::string& t = type->get_ref<const std::string&>();
  const auto only = [&](std::initializer_list<std::string_view> keys) -> Status {
    for (const auto& [key, unused] : value.items()) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        return InvalidAt(field + "." + key, "is not a field of a \"" + t + "\" response_format");
      }
    }
    return Status::Ok();
  };
  if (t == "text" || t == "json_object") {
    if (Status s = only({"type"}); !s.ok()) return s.error();
    f.type = t == "text" ? ResponseFormat::Type::kText : ResponseFormat::Type::kJsonObject;
    return f;
  }
  if (t != "json_schema") {
    return InvalidAt(field + ".type", "must be \"text\", \"json_object\" or \"json_schema\"");
  }
  if (Status s = only({"type", "json_schema"}); !s.ok()) return s.error();
  const auto js = value.find("json_schema");
  const std::string js_field = field + ".json_schema";
  if (js == value.end() || !js->is_object()) return InvalidAt(js_field, "must be an object");
  for (const auto& [key, unused] : js->items()) {
    if (key != "name" && key != "schema" && key != "strict" && key != "description") {
      return InvalidAt(js_field + "." + key, "is not a field of json_schema");
    }
  }
  f.type = ResponseFormat::Type::kJsonSchema;
  if (auto it = js->find("name"); it != js->end()) {
    if (!it->is_string()) return InvalidAt(js_field + ".name", "must be a string");
    f.name = it->get<std::string>();
  }
  if (auto it = js->find("strict"); it != js->end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidAt(js_field + ".strict", "must be a boolean");
    f.strict = it->get<bool>();
  }
  if (auto it = js->find("description"); it != js->end() && !it->is_string()) {
    return InvalidAt(js_field + ".description", "must be a string");
  }
  const auto schema = js->find("schema");
  if (schema == js->end() || !schema->is_object()) {
    return InvalidAt(js_field + ".schema", "must be an object (a JSON Schema)");
  }
  if (Status s = CheckSupportedSchema(*schema, js_field + ".schema"); !s.ok()) return s.error();
  f.schema = *schema;
  return f;
}

nlohmann::ordered_json ToJson(const ResponseFormat& f) {
  switch (f.type) {
    case ResponseFormat::Type::kText:
      return {{"type", "text"}};
    case ResponseFormat::Type::kJsonObject:
      return {{"type", "json_object"}};
    case ResponseFormat::Type::kJsonSchema:
      break;
  }
  Json js = Json::object();
  if (!f.name.empty()) js["name"] = f.name;
  js["schema"] = f.schema;
  if (f.strict) js["strict"] = true;
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

}  // namespace medq
