// Python json.dumps for template values, as transformers' `tojson` filter
// calls it (ensure_ascii=False by default, key order preserved).
#pragma once

#include <optional>
#include <string>

#include "daemon/template/value.h"

namespace medq::chat {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  // nullopt: one line. A string: each level indented by it, items on new lines.
  std::optional<std::string> indent;
  // nullopt: Python's defaults (", " or "," with indent, and ": ").
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// Throws TemplateError for values JSON cannot hold (undefined, namespaces,
// functions) and for nesting deeper than kMaxNestingDepth.
std::string JsonDump(const Value& v, const JsonDumpOptions& options);

}  // namespace medq::chat
