// Statements: the template body, tags and their blocks.
#include "daemon/template/parser.h"

#include "daemon/template/parser_impl.h"

namespace medq::chat {
namespace {

const char* TypeText(TokenType t) {
  switch (t) {
    case TokenType::kData:
      return "template data";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block";
    case TokenType::kVarBegin:
      return "'{{'";
    case TokenType::kVarEnd:
      return "end of print statement";
    case TokenType::kName:
      return "name";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kOperator:
      return "operator";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

}  // namespace

std::string DescribeToken(const Token& t) {
  if (t.type == TokenType::kName || t.type == TokenType::kOperator) return "'" + t.value + "'";
  return TypeText(t.type);
}

Body Parser::ParseBody(const std::set<std::string>& ends) {
  Depth depth(*this);
  std::string want;
  for (const auto& e : ends)
    want += (want.empty() ? "'" : " or '") + e + "'";
  const std::string saved = expected_;
  expected_ = want;
  Body body = ParseBodyUntil(ends);
  expected_ = saved;
  return body;
}

Body Parser::ParseBodyUntil(const std::set<std::string>& ends) {
  Body body;
  while (true) {
    const Token& t = Cur();
    if (t.type == TokenType::kEof) {
      if (!ends.empty()) Fail("unexpected end of template, expected " + expected_);
      return body;
    }
    if (t.type == TokenType::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kData;
      s->pos = t.pos;
      s->text = t.value;
      body.push_back(std::move(s));
      Advance();
    } else if (t.type == TokenType::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kPrint;
      s->pos = t.pos;
      Advance();
      s->expr = ParseTuple(true, false);
      if (Cur().type != TokenType::kVarEnd) {
        Fail("expected end of print statement, got " + DescribeToken(Cur()));
      }
      Advance();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      Advance();
      if (Cur().type == TokenType::kName && ends.count(Cur().value) > 0) return body;
      body.push_back(ParseStatement());
    } else {
      Fail("unexpected " + DescribeToken(t));
    }
  }
}

StmtPtr Parser::ParseStatement() {
  if (Cur().type != TokenType::kName) Fail("tag name expected, got " + DescribeToken(Cur()));
  const std::string name = Cur().value;
  const SourcePos pos = Cur().pos;
  auto s = std::make_unique<Stmt>();
  s->pos = pos;
  Advance();
  if (name == "if") {
    ParseIf(*s);
  } else if (name == "for") {
    ParseFor(*s);
  } else if (name == "set") {
    ParseSet(*s);
  } else if (name == "macro") {
    ParseMacro(*s);
  } else if (name == "call") {
    ParseCallBlock(*s);
  } else if (name == "break" || name == "continue") {
    s->kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    ExpectBlockEnd();
  } else if (name == "filter") {
    ParseFilterBlock(*s);
  } else if (name == "with") {
    ParseWith(*s);
  } else if (name == "generation") {
    s->kind = Stmt::Kind::kScope;
    ExpectBlockEnd();
    s->body = ParseBody({"endgeneration"});
    Advance();
    ExpectBlockEnd();
  } else {
    std::string msg = "unknown or unsupported tag '" + name + "'";
    if (!expected_.empty()) msg += "; the open block expects " + expected_;
    throw TemplateError(msg, pos);
  }
  return s;
}

void Parser::ParseIf(Stmt& s) {
  s.kind = Stmt::Kind::kIf;
  while (true) {
    ExprPtr cond = ParseTuple(false, false);
    ExpectBlockEnd();
    Body body = ParseBody({"elif", "else", "endif"});
    s.branches.emplace_back(std::move(cond), std::move(body));
    const std::string end = Cur().value;
    Advance();
    if (end == "elif") continue;
    if (end == "else") {
      ExpectBlockEnd();
      s.else_body = ParseBody({"endif"});
      Advance();
    }
    ExpectBlockEnd();
    return;
  }
}

std::vector<std::string> Parser::ParseTargets(std::string_view stop) {
  std::vector<std::string> names;
  const bool paren = SkipOp("(");
  while (true) {
    names.push_back(ExpectName());
    if (!SkipOp(",")) break;
    if (IsName(stop) || IsOp(")")) break;
  }
  if (paren) ExpectOp(")");
  return names;
}

void Parser::ParseFor(Stmt& s) {
  s.kind = Stmt::Kind::kFor;
  s.targets = ParseTargets("in");
  if (!SkipName("in")) Fail("expected 'in', got " + DescribeToken(Cur()));
  s.expr = ParseTuple(false, true);
  if (SkipName("if")) s.filter = ParseExpression(true);
  if (IsName("recursive")) Fail("recursive for loops are not supported");
  ExpectBlockEnd();
  const int loop_refs_before = loop_refs_;
  s.body = ParseBody({"endfor", "else"});
  // Over-approximate (a nested loop's own `loop` counts too): the evaluator
  // builds the loop object only when the body may read it.
  s.uses_loop = loop_refs_ != loop_refs_before;
  if (Cur().value == "else") {
    Advance();
    ExpectBlockEnd();
    s.else_body = ParseBody({"endfor"});
  }
  Advance();
  ExpectBlockEnd();
}

void Parser::ParseSet(Stmt& s) {
  const SourcePos pos = Cur().pos;
  std::string first = ExpectName();
  if (IsOp(".")) {
    Advance();
    auto ns = std::make_unique<Expr>();
    ns->kind = Expr::Kind::kName;
    ns->pos = pos;
    ns->name = first;
    s.attr_target = std::move(ns);
    s.name = ExpectName();
  } else {
    s.targets.push_back(first);
    while (SkipOp(",")) {
      if (IsOp("=")) break;
      s.targets.push_back(ExpectName());
    }
  }
  if (SkipOp("=")) {
    s.kind = Stmt::Kind::kSet;
    s.expr = ParseTuple(true, false);
    ExpectBlockEnd();
    return;
  }
  if (s.attr_target != nullptr || s.targets.size() != 1) {
    Fail("expected '=' in set statement");
  }
  s.kind = Stmt::Kind::kSetBlock;
  if (IsOp("|")) {
    // `{% set x | filter %}`: apply filters to the captured body.
    auto holder = std::make_unique<Expr>();
    holder->kind = Expr::Kind::kName;
    holder->pos = Cur().pos;
    holder->name = "";  // the evaluator substitutes the captured text
    s.expr = ParseFilterExpr(std::move(holder));
  }
  ExpectBlockEnd();
  s.body = ParseBody({"endset"});
  Advance();
  ExpectBlockEnd();
}

void Parser::ParseFilterBlock(Stmt& s) {
  s.kind = Stmt::Kind::kFilterBlock;
  auto holder = std::make_unique<Expr>();
  holder->kind = Expr::Kind::kName;
  holder->pos = Cur().pos;
  auto f = std::make_unique<Expr>();
  f->kind = Expr::Kind::kFilter;
  f->pos = Cur().pos;
  f->name = DottedName();
  f->children.push_back(std::move(holder));
  if (IsOp("(")) ParseArgs(*f);
  s.expr = ParseFilterExpr(std::move(f));
  ExpectBlockEnd();
  s.body = ParseBody({"endfilter"});
  Advance();
  ExpectBlockEnd();
}

void Parser::ParseWith(Stmt& s) {
  s.kind = Stmt::Kind::kWith;
  while (Cur().type != TokenType::kBlockEnd) {
    if (!s.params.empty()) ExpectOp(",");
    std::string var = ExpectName();
    ExpectOp("=");
    s.params.emplace_back(std::move(var), ParseExpression(true));
  }
  ExpectBlockEnd();
  s.body = ParseBody({"endwith"});
  Advance();
  ExpectBlockEnd();
}

void Parser::ParseParams(KeywordArgs& params) {
  ExpectOp("(");
  while (!IsOp(")")) {
    if (!params.empty()) ExpectOp(",");
    if (IsOp(")")) break;
    std::string pname = ExpectName();
    ExprPtr def;
    if (SkipOp("=")) def = ParseExpression(true);
    params.emplace_back(std::move(pname), std::move(def));
  }
  Advance();
}

void Parser::ParseMacro(Stmt& s) {
  s.kind = Stmt::Kind::kMacro;
  s.name = ExpectName();
  ParseParams(s.params);
  ExpectBlockEnd();
  s.body = ParseBody({"endmacro"});
  Advance();
  ExpectBlockEnd();
}

void Parser::ParseCallBlock(Stmt& s) {
  s.kind = Stmt::Kind::kCallBlock;
  if (IsOp("(")) ParseParams(s.params);
  s.expr = ParseExpression(true);
  if (s.expr->kind != Expr::Kind::kCall) Fail("expected a call in the call block");
  ExpectBlockEnd();
  s.body = ParseBody({"endcall"});
  Advance();
  ExpectBlockEnd();
}

ParsedTemplate ParseTemplate(std::string_view source) {
  return Parser(Tokenize(source)).Run();
}

}  // namespace medq::chat
