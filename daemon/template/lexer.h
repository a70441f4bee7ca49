// Splits template source into tokens exactly as Jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True: whitespace control (`{%-`, `-%}`,
// `{{-`, `-}}`, `+`), comments and `{% raw %}` are resolved here, so the
// parser sees only data text, tag delimiters and expression tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/template/template_error.h"

namespace medq::chat {

enum class TokenType {
  kData,        // literal text between tags (already whitespace-controlled)
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kVarBegin,    // {{
  kVarEnd,      // }}
  kName,
  kString,  // value is the unescaped string
  kInteger,
  kFloat,
  kOperator,  // value is the operator text, e.g. "//", "[", "|"
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0.0;
  SourcePos pos;
};

// Tokenizes `source`. Line endings are normalized to "\n" and one trailing
// newline is dropped, as Jinja2 does (keep_trailing_newline=False).
// Throws TemplateError (with position) on unterminated tags, strings or
// comments, unbalanced brackets, and characters that start no token.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace medq::chat
