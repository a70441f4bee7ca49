#include "daemon/template/parser.h"

#include <set>

#include "daemon/template/lexer.h"

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

std::string Describe(const Token& t) {
  if (t.type == TokenType::kName || t.type == TokenType::kOperator) return "'" + t.value + "'";
  return TypeText(t.type);
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  ParsedTemplate Run() {
    ParsedTemplate t;
    t.body = ParseBody({});
    if (Cur().type != TokenType::kEof) Fail("unexpected " + Describe(Peek(1)));
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
    if (!SkipOp(op)) Fail("expected '" + std::string(op) + "', got " + Describe(Cur()));
  }
  std::string ExpectName() {
    if (Cur().type != TokenType::kName) Fail("expected a name, got " + Describe(Cur()));
    std::string n = Cur().value;
    Advance();
    return n;
  }
  void ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) {
      Fail("expected end of statement block, got " + Describe(Cur()));
    }
    Advance();
  }

  // Parses statements until a `{% name %}` with name in `ends`; leaves the
  // cursor on that name. At top level (`ends` empty) stops at end of input.
  Body ParseBody(const std::set<std::string>& ends) {
    Depth depth(*this);
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == TokenType::kEof) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends)
            want += (want.empty() ? "'" : " or '") + e + "'";
          Fail("unexpected end of template, expected " + want);
        }
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
          Fail("expected end of print statement, got " + Describe(Cur()));
        }
        Advance();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        Advance();
        if (Cur().type == TokenType::kName && ends.count(Cur().value) > 0) return body;
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected " + Describe(t));
      }
    }
  }

  StmtPtr ParseStatement() {
    if (Cur().type != TokenType::kName) Fail("tag name expected, got " + Describe(Cur()));
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
      throw TemplateError("unknown or unsupported tag '" + name + "'", pos);
    }
    return s;
  }

  void ParseIf(Stmt& s) {
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

  std::vector<std::string> ParseTargets(std::string_view stop) {
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

  void ParseFor(Stmt& s) {
    s.kind = Stmt::Kind::kFor;
    s.targets = ParseTargets("in");
    if (!SkipName("in")) Fail("expected 'in', got " + Describe(Cur()));
    s.expr = ParseTuple(false, true);
    if (SkipName("if")) s.filter = ParseExpression(true);
    if (IsName("recursive")) Fail("recursive for loops are not supported");
    ExpectBlockEnd();
    s.body = ParseBody({"endfor", "else"});
    if (Cur().value == "else") {
      Advance();
      ExpectBlockEnd();
      s.else_body = ParseBody({"endfor"});
    }
    Advance();
    ExpectBlockEnd();
  }

  void ParseSet(Stmt& s) {
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

  // `{% filter name(args) | more %}`: the chain is applied to a placeholder
  // (the empty name) that the evaluator binds to the rendered body.
  void ParseFilterBlock(Stmt& s) {
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

  void ParseWith(Stmt& s) {
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

  void ParseParams(KeywordArgs& params) {
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

  void ParseMacro(Stmt& s) {
    s.kind = Stmt::Kind::kMacro;
    s.name = ExpectName();
    ParseParams(s.params);
    ExpectBlockEnd();
    s.body = ParseBody({"endmacro"});
    Advance();
    ExpectBlockEnd();
  }

  void ParseCallBlock(Stmt& s) {
    s.kind = Stmt::Kind::kCallBlock;
    if (IsOp("(")) ParseParams(s.params);
    s.expr = ParseExpression(true);
    if (s.expr->kind != Expr::Kind::kCall) Fail("expected a call in the call block");
    ExpectBlockEnd();
    s.body = ParseBody({"endcall"});
    Advance();
    ExpectBlockEnd();
  }

  // ---- expressions ----

  ExprPtr Make(Expr::Kind kind, SourcePos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = pos;
    return e;
  }

  bool IsTupleEnd(bool in_for) const {
    if (Cur().type == TokenType::kVarEnd || Cur().type == TokenType::kBlockEnd ||
        Cur().type == TokenType::kEof) {
      return true;
    }
    if (IsOp(")")) return true;
    return in_for && (IsName("if") || IsName("recursive"));
  }

  // Jinja2's parse_tuple: `a, b` builds a tuple; a single item is itself.
  ExprPtr ParseTuple(bool with_condexpr, bool in_for, bool explicit_parens = false) {
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
      if (!explicit_parens) Fail("expected an expression, got " + Describe(Cur()));
    }
    auto t = Make(Expr::Kind::kTuple, pos);
    t->children = std::move(items);
    return t;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
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

  ExprPtr Binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, SourcePos pos) {
    auto b = Make(kind, pos);
    b->name = std::move(op);
    b->children.push_back(std::move(l));
    b->children.push_back(std::move(r));
    return b;
  }

  ExprPtr ParseOr() {
    ExprPtr l = ParseAnd();
    while (IsName("or")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kOr, "or", std::move(l), ParseAnd(), pos);
    }
    return l;
  }

  ExprPtr ParseAnd() {
    ExprPtr l = ParseNot();
    while (IsName("and")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kAnd, "and", std::move(l), ParseNot(), pos);
    }
    return l;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      Depth depth(*this);
      auto n = Make(Expr::Kind::kNot, Cur().pos);
      Advance();
      n->children.push_back(ParseNot());
      return n;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    ExprPtr first = ParseMath1();
    ExprPtr result;
    ExprPtr* left = &first;
    std::vector<ExprPtr> operands;
    while (true) {
      std::string op;
      const SourcePos pos = Cur().pos;
      if (Cur().type == TokenType::kOperator &&
          (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" ||
           Cur().value == "<=" || Cur().value == ">" || Cur().value == ">=")) {
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

  ExprPtr CloneOperand(const Expr& e) {
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

  ExprPtr ParseMath1() {
    ExprPtr l = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Cur().value;
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kBinary, op, std::move(l), ParseConcat(), pos);
    }
    return l;
  }

  ExprPtr ParseConcat() {
    ExprPtr l = ParseMath2();
    while (IsOp("~")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kBinary, "~", std::move(l), ParseMath2(), pos);
    }
    return l;
  }

  ExprPtr ParseMath2() {
    ExprPtr l = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Cur().value;
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kBinary, op, std::move(l), ParsePow(), pos);
    }
    return l;
  }

  ExprPtr ParsePow() {
    ExprPtr l = ParseUnary(true);
    while (IsOp("**")) {
      const SourcePos pos = Cur().pos;
      Advance();
      l = Binary(Expr::Kind::kBinary, "**", std::move(l), ParseUnary(true), pos);
    }
    return l;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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
    Fail("unexpected " + Describe(t));
  }

  ExprPtr ParseList() {
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

  ExprPtr ParseDict() {
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

  ExprPtr ParsePostfix(ExprPtr node) {
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
          Fail("expected name or number after '.', got " + Describe(Cur()));
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

  ExprPtr ParseSubscript(ExprPtr node) {
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
      if (parts[part] != nullptr) Fail("expected ':' or ']', got " + Describe(Cur()));
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

  // Parses `(args, kw=value)` into a node of `kind` whose children[0] is `node`.
  ExprPtr ParseCall(ExprPtr node, Expr::Kind kind, std::string name = "") {
    auto c = Make(kind, Cur().pos);
    c->name = std::move(name);
    c->children.push_back(std::move(node));
    ParseArgs(*c);
    return c;
  }

  void ParseArgs(Expr& c) {
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

  std::string DottedName() {
    std::string name = ExpectName();
    while (IsOp(".") && Peek(1).type == TokenType::kName) {
      Advance();
      name += "." + Cur().value;
      Advance();
    }
    return name;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
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

  ExprPtr ParseTest(ExprPtr node) {
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

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

ParsedTemplate ParseTemplate(std::string_view source) {
  return Parser(Tokenize(source)).Run();
}

}  // namespace medq::chat
