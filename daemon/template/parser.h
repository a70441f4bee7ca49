// Builds the syntax tree of a template from its tokens, following Jinja2's
// grammar (operator precedence, filters binding tighter than arithmetic,
// `is` tests, conditional expressions, slices, tuples).
#pragma once

#include <string_view>

#include "daemon/template/ast.h"

namespace medq::chat {

// Parses a whole template. Throws TemplateError with the position of the
// offending token on syntax errors, unknown or unsupported tags (extends,
// include, import), unclosed blocks and nesting deeper than kMaxNestingDepth.
ParsedTemplate ParseTemplate(std::string_view source);

}  // namespace medq::chat
