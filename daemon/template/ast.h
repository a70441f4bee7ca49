// The syntax tree the parser builds and the evaluator walks. Nodes own their
// children; a parsed template is immutable, so one tree may be rendered from
// several threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/template/template_error.h"
#include "daemon/template/value.h"

namespace medq::chat {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal: a scalar constant
    kName,     // name
    kList,     // children: items
    kTuple,    // children: items (evaluates to a list)
    kDict,     // children: key0, value0, key1, value1...
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][c1:c2:c3]; missing parts are null
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs)
    kTest,     // children[0] is [not] name(children[1..], kwargs)
    kNot,      // not children[0]
    kNeg,      // -children[0]
    kPos,      // +children[0]
    kBinary,   // children[0] <name> children[1]; name is the operator
    kAnd,      // children[0] and children[1]
    kOr,       // children[0] or children[1]
    kCond,     // children[0] if children[1] else children[2] (may be null)
  };

  Kind kind = Kind::kLiteral;
  SourcePos pos;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  KeywordArgs kwargs;
  bool negated = false;  // kTest: `is not`
};

struct Stmt {
  enum class Kind {
    kData,       // text
    kPrint,      // {{ expr }}
    kIf,         // branches (condition, body), else_body
    kFor,        // for targets in expr [if filter] body [else else_body]
    kSet,        // set targets = expr, or set expr.attr = value (attr_target)
    kSetBlock,   // set targets[0] %} body {% endset
    kMacro,      // macro name(params) body
    kCallBlock,  // call(params) expr %} body {% endcall: `caller()` renders body
    kBreak,
    kContinue,
    kScope,        // a block that just renders its body ({% generation %})
    kFilterBlock,  // filter <expr> %} body {% endfilter: expr filters the text
    kWith,         // with params %} body {% endwith: params bound in a new scope
  };

  Kind kind = Kind::kData;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  ExprPtr filter;         // kFor: loop filter condition
  bool uses_loop = true;  // kFor: the body may read `loop`
  ExprPtr attr_target;    // kSet: the namespace expression of `set ns.attr = ...`
  std::string name;       // kMacro name; kSet attribute name
  KeywordArgs params;     // kMacro/kCallBlock: parameter names and defaults (null = none);
                          // (kWith: the names and their values)
                          // kWith: the names and their values
};

struct ParsedTemplate {
  Body body;
};

}  // namespace medq::chat
