// Internal to medq_template: the recursive-descent parser behind
// ParseTemplate(). Statements are parsed in parser.cc, expressions in
// parser_expr.cc. Errors are thrown as TemplateError at the current token.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/template/ast.h"
#include "daemon/template/lexer.h"

namespace medq::chat {

// A token as error messages name it: "'endfor'", "end of template"...
std::string DescribeToken(const Token& t);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  ParsedTemplate Run() {
    ParsedTemplate t;
    t.body = ParseBody({});
    if (Cur().type != TokenType::kEof) Fail("unexpected " + DescribeToken(Cur()));
    return t;
  }

 private:
  // RAII guard for recursion depth.
  class Depth {
   public:
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNestingDepth) {
        p_.Fail("template is nested too deeply (more than " + std::to_string(kMaxNestingDepth) +
                " levels)");
      }
    }
    ~Depth() { --p_.depth_; }
    Depth(const Depth&) = delete;
    Depth& operator=(const Depth&) = delete;

   private:
    Parser& p_;
  };

  const Token& Cur() const { return toks_[i_]; }
  const Token& Peek(size_t n) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void Advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  [[noreturn]] void Fail(const std::string& msg) const { throw TemplateError(msg, Cur().pos); }

  bool IsName(std::string_view n) const {
    return Cur().type == TokenType::kName && Cur().value == n;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOperator && Cur().value == op;
  }
  bool SkipName(std::string_view n) {
    if (!IsName(n)) return false;
    Advance();
    return true;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Advance();
    return true;
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) Fail("expected '" + std::string(op) + "', got " + DescribeToken(Cur()));
  }
  std::string ExpectName() {
    if (Cur().type != TokenType::kName) Fail("expected a name, got " + DescribeToken(Cur()));
    std::string n = Cur().value;
    Advance();
    return n;
  }
  void ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) {
      Fail("expected end of statement block, got " + DescribeToken(Cur()));
    }
    Advance();
  }

  // Parses statements until a `{% name %}` with name in `ends`; leaves the
  // cursor on that name. At top level (`ends` empty) stops at end of input.
  Body ParseBody(const std::set<std::string>& ends);
  Body ParseBodyUntil(const std::set<std::string>& ends);

  StmtPtr ParseStatement();

  void ParseIf(Stmt& s);

  std::vector<std::string> ParseTargets(std::string_view stop);

  void ParseFor(Stmt& s);

  void ParseSet(Stmt& s);

  // `{% filter name(args) | more %}`: the chain is applied to a placeholder
  // (the empty name) that the evaluator binds to the rendered body.
  void ParseFilterBlock(Stmt& s);

  void ParseWith(Stmt& s);

  void ParseParams(KeywordArgs& params);

  void ParseMacro(Stmt& s);

  void ParseCallBlock(Stmt& s);

  ExprPtr Make(Expr::Kind kind, SourcePos pos);

  bool IsTupleEnd(bool in_for) const;

  // Jinja2's parse_tuple: `a, b` builds a tuple; a single item is itself.
  ExprPtr ParseTuple(bool with_condexpr, bool in_for, bool explicit_parens = false);

  ExprPtr ParseExpression(bool with_condexpr);

  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, SourcePos pos);

  ExprPtr ParseOr();

  ExprPtr ParseAnd();

  ExprPtr ParseNot();

  ExprPtr ParseCompare();

  ExprPtr CloneOperand(const Expr& e);

  ExprPtr ParseMath1();

  ExprPtr ParseConcat();

  ExprPtr ParseMath2();

  ExprPtr ParsePow();

  ExprPtr ParseUnary(bool with_filter);

  ExprPtr ParsePrimary();

  ExprPtr ParseList();

  ExprPtr ParseDict();

  ExprPtr ParsePostfix(ExprPtr node);

  ExprPtr ParseSubscript(ExprPtr node);

  // Parses `(args, kw=value)` into a node of `kind` whose children[0] is `node`.
  ExprPtr ParseCall(ExprPtr node, Expr::Kind kind, std::string name = "");

  void ParseArgs(Expr& c);

  std::string DottedName();

  ExprPtr ParseFilterExpr(ExprPtr node);

  ExprPtr ParseTest(ExprPtr node);

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  std::string expected_;
  int loop_refs_ = 0;  // names `loop` parsed so far (see Stmt::uses_loop)  // the end tags the
                       // innermost open block accepts
};

}  // namespace medq::chat
