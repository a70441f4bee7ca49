// Expressions, with Jinja2's precedence: conditional, or, and, not,
// comparisons, + -, ~, * / // %, **, unary, then postfix access, calls,
// filters and tests.
#include "daemon/template/parser_impl.h"

namespace medq::chat {

ExprPtr Parser::Make(Expr::Kind kind, SourcePos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

bool Parser::IsTupleEnd(bool in_for) const {
  if (Cur().type == TokenType::kVarEnd || Cur().type == TokenType::kBlockEnd ||
      Cur().type == TokenType::kEof) {
    return true;
  }
  if (IsOp(")")) return true;
  return in_for && (IsName("if") || IsName("recursive"));
}

ExprPtr Parser::ParseTuple(bool with_condexpr, bool in_for, bool explicit_parens) {
  const SourcePos pos = Cur().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ExpectOp(",");
    if (IsTupleEnd(in_for)) break;
    items.push_back(ParseExpression(with_condexpr));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) Fail("expected an expression, got " + DescribeToken(Cur()));
  }
  auto t = Make(Expr::Kind::kTuple, pos);
  t->children = std::move(items);
  return t;
}

ExprPtr Parser::ParseExpression(bool with_condexpr) {
  Depth depth(*this);
  if (!with_condexpr) return ParseOr();
  ExprPtr e = ParseOr();
  while (IsName("if")) {
    const SourcePos pos = Cur().pos;
    Advance();
    ExprPtr test = ParseOr();
    ExprPtr otherwise;
    if (SkipName("else")) otherwise = ParseExpression(true);
    auto c = Make(Expr::Kind::kCond, pos);
    c->children.push_back(std::move(e));
    c->children.push_back(std::move(test));
    c->children.push_back(std::move(otherwise));
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::Binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, SourcePos pos) {
  auto b = Make(kind, pos);
  b->name = std::move(op);
  b->children.push_back(std::move(l));
  b->children.push_back(std::move(r));
  return b;
}

ExprPtr Parser::ParseOr() {
  ExprPtr l = ParseAnd();
  while (IsName("or")) {
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kOr, "or", std::move(l), ParseAnd(), pos);
  }
  return l;
}

ExprPtr Parser::ParseAnd() {
  ExprPtr l = ParseNot();
  while (IsName("and")) {
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kAnd, "and", std::move(l), ParseNot(), pos);
  }
  return l;
}

ExprPtr Parser::ParseNot() {
  if (IsName("not")) {
    Depth depth(*this);
    auto n = Make(Expr::Kind::kNot, Cur().pos);
    Advance();
    n->children.push_back(ParseNot());
    return n;
  }
  return ParseCompare();
}

ExprPtr Parser::ParseCompare() {
  ExprPtr first = ParseMath1();
  ExprPtr result;
  ExprPtr* left = &first;
  std::vector<ExprPtr> operands;
  while (true) {
    std::string op;
    const SourcePos pos = Cur().pos;
    if (Cur().type == TokenType::kOperator &&
        (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" || Cur().value == "<=" ||
         Cur().value == ">" || Cur().value == ">=")) {
      op = Cur().value;
      Advance();
    } else if (IsName("in")) {
      op = "in";
      Advance();
    } else if (IsName("not") && Peek(1).type == TokenType::kName && Peek(1).value == "in") {
      op = "not in";
      Advance();
      Advance();
    } else {
      break;
    }
    ExprPtr right = ParseMath1();
    // A chain `a < b < c` means `a < b and b < c`; the middle operand is
    // evaluated twice, which is harmless as template expressions are pure.
    ExprPtr lhs = result == nullptr ? std::move(*left) : CloneOperand(*operands.back());
    operands.push_back(CloneOperand(*right));
    ExprPtr cmp = Binary(Expr::Kind::kBinary, op, std::move(lhs), std::move(right), pos);
    result = result == nullptr
                 ? std::move(cmp)
                 : Binary(Expr::Kind::kAnd, "and", std::move(result), std::move(cmp), pos);
  }
  return result != nullptr ? std::move(result) : std::move(first);
}

ExprPtr Parser::CloneOperand(const Expr& e) {
  auto c = Make(e.kind, e.pos);
  c->literal = e.literal;
  c->name = e.name;
  c->negated = e.negated;
  for (const auto& ch : e.children)
    c->children.push_back(ch ? CloneOperand(*ch) : nullptr);
  for (const auto& [k, v] : e.kwargs)
    c->kwargs.emplace_back(k, v ? CloneOperand(*v) : nullptr);
  return c;
}

ExprPtr Parser::ParseMath1() {
  ExprPtr l = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    const std::string op = Cur().value;
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kBinary, op, std::move(l), ParseConcat(), pos);
  }
  return l;
}

ExprPtr Parser::ParseConcat() {
  ExprPtr l = ParseMath2();
  while (IsOp("~")) {
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kBinary, "~", std::move(l), ParseMath2(), pos);
  }
  return l;
}

ExprPtr Parser::ParseMath2() {
  ExprPtr l = ParsePow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    const std::string op = Cur().value;
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kBinary, op, std::move(l), ParsePow(), pos);
  }
  return l;
}

ExprPtr Parser::ParsePow() {
  ExprPtr l = ParseUnary(true);
  while (IsOp("**")) {
    const SourcePos pos = Cur().pos;
    Advance();
    l = Binary(Expr::Kind::kBinary, "**", std::move(l), ParseUnary(true), pos);
  }
  return l;
}

ExprPtr Parser::ParseUnary(bool with_filter) {
  Depth depth(*this);
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().pos);
    Advance();
    node->children.push_back(ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr Parser::ParsePrimary() {
  const Token& t = Cur();
  const SourcePos pos = t.pos;
  switch (t.type) {
    case TokenType::kName: {
      auto e = Make(Expr::Kind::kLiteral, pos);
      if (t.value == "true" || t.value == "True") {
        e->literal = Value::Bool(true);
      } else if (t.value == "false" || t.value == "False") {
        e->literal = Value::Bool(false);
      } else if (t.value == "none" || t.value == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.value;
        if (t.value == "loop") ++loop_refs_;
      }
      Advance();
      return e;
    }
    case TokenType::kString: {
      std::string s;
      while (Cur().type == TokenType::kString) {
        s += Cur().value;
        Advance();
      }
      auto e = Make(Expr::Kind::kLiteral, pos);
      e->literal = Value::Str(std::move(s));
      return e;
    }
    case TokenType::kInteger:
    case TokenType::kFloat: {
      auto e = Make(Expr::Kind::kLiteral, pos);
      e->literal =
          t.type == TokenType::kInteger ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Advance();
      return e;
    }
    case TokenType::kOperator:
      if (t.value == "(") {
        Advance();
        ExprPtr e = ParseTuple(true, false, true);
        ExpectOp(")");
        return e;
      }
      if (t.value == "[") return ParseList();
      if (t.value == "{") return ParseDict();
      break;
    default:
      break;
  }
  Fail("unexpected " + DescribeToken(t));
}

ExprPtr Parser::ParseList() {
  auto e = Make(Expr::Kind::kList, Cur().pos);
  Advance();
  while (!IsOp("]")) {
    if (!e->children.empty()) ExpectOp(",");
    if (IsOp("]")) break;
    e->children.push_back(ParseExpression(true));
  }
  Advance();
  return e;
}

ExprPtr Parser::ParseDict() {
  auto e = Make(Expr::Kind::kDict, Cur().pos);
  Advance();
  while (!IsOp("}")) {
    if (!e->children.empty()) ExpectOp(",");
    if (IsOp("}")) break;
    e->children.push_back(ParseExpression(true));
    ExpectOp(":");
    e->children.push_back(ParseExpression(true));
  }
  Advance();
  return e;
}

ExprPtr Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (IsOp(".")) {
      const SourcePos pos = Cur().pos;
      Advance();
      if (Cur().type == TokenType::kName) {
        auto g = Make(Expr::Kind::kGetAttr, pos);
        g->name = Cur().value;
        g->children.push_back(std::move(node));
        node = std::move(g);
      } else if (Cur().type == TokenType::kInteger) {
        auto idx = Make(Expr::Kind::kLiteral, Cur().pos);
        idx->literal = Value::Int(Cur().int_value);
        auto g = Make(Expr::Kind::kGetItem, pos);
        g->children.push_back(std::move(node));
        g->children.push_back(std::move(idx));
        node = std::move(g);
      } else {
        Fail("expected name or number after '.', got " + DescribeToken(Cur()));
      }
      Advance();
    } else if (IsOp("[")) {
      node = ParseSubscript(std::move(node));
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node), Expr::Kind::kCall);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseSubscript(ExprPtr node) {
  const SourcePos pos = Cur().pos;
  Advance();  // [
  ExprPtr parts[3];
  bool is_slice = false;
  int part = 0;
  while (!IsOp("]")) {
    if (IsOp(":")) {
      if (++part > 2) Fail("too many ':' in slice");
      is_slice = true;
      Advance();
      continue;
    }
    if (parts[part] != nullptr) Fail("expected ':' or ']', got " + DescribeToken(Cur()));
    parts[part] = ParseExpression(true);
    if (IsOp(",")) Fail("tuple subscripts are not supported");
  }
  Advance();  // ]
  if (!is_slice) {
    if (parts[0] == nullptr) Fail("expected an expression inside '[]'");
    auto g = Make(Expr::Kind::kGetItem, pos);
    g->children.push_back(std::move(node));
    g->children.push_back(std::move(parts[0]));
    return g;
  }
  auto s = Make(Expr::Kind::kSlice, pos);
  s->children.push_back(std::move(node));
  for (auto& p : parts)
    s->children.push_back(std::move(p));
  return s;
}

ExprPtr Parser::ParseCall(ExprPtr node, Expr::Kind kind, std::string name) {
  auto c = Make(kind, Cur().pos);
  c->name = std::move(name);
  c->children.push_back(std::move(node));
  ParseArgs(*c);
  return c;
}

void Parser::ParseArgs(Expr& c) {
  ExpectOp("(");
  bool first = true;
  while (!IsOp(")")) {
    if (!first) ExpectOp(",");
    first = false;
    if (IsOp(")")) break;
    if (Cur().type == TokenType::kName && Peek(1).type == TokenType::kOperator &&
        Peek(1).value == "=") {
      std::string key = Cur().value;
      Advance();
      Advance();
      c.kwargs.emplace_back(std::move(key), ParseExpression(true));
    } else {
      if (!c.kwargs.empty()) Fail("positional argument after keyword argument");
      c.children.push_back(ParseExpression(true));
    }
  }
  Advance();
}

std::string Parser::DottedName() {
  std::string name = ExpectName();
  while (IsOp(".") && Peek(1).type == TokenType::kName) {
    Advance();
    name += "." + Cur().value;
    Advance();
  }
  return name;
}

ExprPtr Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      Advance();
      const SourcePos pos = Cur().pos;  // errors point at the filter's name
      auto f = Make(Expr::Kind::kFilter, pos);
      f->name = DottedName();
      f->children.push_back(std::move(node));
      if (IsOp("(")) ParseArgs(*f);
      node = std::move(f);
    } else if (IsName("is")) {
      node = ParseTest(std::move(node));
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node), Expr::Kind::kCall);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::ParseTest(ExprPtr node) {
  auto t = Make(Expr::Kind::kTest, Cur().pos);
  Advance();  // is
  if (SkipName("not")) t->negated = true;
  t->name = DottedName();
  t->children.push_back(std::move(node));
  const Token& c = Cur();
  if (IsOp("(")) {
    ParseArgs(*t);
  } else if ((c.type == TokenType::kName || c.type == TokenType::kString ||
              c.type == TokenType::kInteger || c.type == TokenType::kFloat || IsOp("[") ||
              IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) Fail("you cannot chain multiple tests with 'is'");
    t->children.push_back(ParsePostfix(ParsePrimary()));
  }
  return t;
}

}  // namespace medq::chat
