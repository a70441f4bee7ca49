// Statements: output, if, for, set, macro, call blocks, loop controls.
#include "daemon/template/evaluator.h"

#include "daemon/template/builtins.h"

namespace medq::chat {

Evaluator::Evaluator(const ParsedTemplate& tmpl, std::shared_ptr<Scope> globals)
    : tmpl_(tmpl), scope_(std::make_shared<Scope>(std::move(globals))) {}

Evaluator::~Evaluator() {
  for (Value& ns : namespaces_)
    ns.namespace_attrs().items.clear();
}

std::string Evaluator::Render() {
  std::string out;
  const Flow flow = Exec(tmpl_.body, out);
  if (flow != Flow::kNormal) {
    throw TemplateError("'break' or 'continue' outside of a for loop", pos_);
  }
  return out;
}

void Evaluator::CountIteration() {
  if (++iterations_ > kMaxLoopIterations) {
    throw TemplateError("template ran more than " + std::to_string(kMaxLoopIterations) +
                        " loop iterations; giving up");
  }
}

void Evaluator::CheckSize(size_t bytes) {
  if (bytes > kMaxOutputBytes) {
    throw TemplateError("template output or a value in it exceeds " +
                        std::to_string(kMaxOutputBytes >> 20) + " MiB");
  }
}

Evaluator::Flow Evaluator::Exec(const Body& body, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow f = ExecStmt(*s, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::ExecStmt(const Stmt& s, std::string& out) {
  DepthGuard guard(*this);
  try {
    pos_ = s.pos;
    switch (s.kind) {
      case Stmt::Kind::kData:
        out += s.text;
        CheckSize(out.size());
        return Flow::kNormal;
      case Stmt::Kind::kPrint: {
        const Value v = Eval(*s.expr);
        out += v.Str();
        CheckSize(out.size());
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf: {
        Flow flow = Flow::kNormal;
        ExecIf(s, out, flow);
        return flow;
      }
      case Stmt::Kind::kFor:
        ExecFor(s, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet:
        ExecSet(s);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock:
        ExecSetBlock(s);
        return Flow::kNormal;
      case Stmt::Kind::kMacro:
        scope_->Set(s.name, MakeMacro(s, scope_));
        return Flow::kNormal;
      case Stmt::Kind::kCallBlock:
        ExecCallBlock(s, out);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kScope:
        return Exec(s.body, out);
      case Stmt::Kind::kFilterBlock:
        out += ApplyCaptureFilter(*s.expr, RenderBodyIn(s.body, std::make_shared<Scope>(scope_)))
                   .Str();
        CheckSize(out.size());
        return Flow::kNormal;
      case Stmt::Kind::kWith: {
        auto inner = std::make_shared<Scope>(scope_);
        for (const auto& [var, value] : s.params)
          inner->Set(var, Eval(*value));
        out += RenderBodyIn(s.body, inner);
        CheckSize(out.size());
        return Flow::kNormal;
      }
    }
  } catch (const TemplateError& err) {
    if (!err.has_pos()) throw TemplateError(err.what(), s.pos);
    throw;
  }
  return Flow::kNormal;
}

void Evaluator::ExecIf(const Stmt& s, std::string& out, Flow& flow) {
  for (const auto& [cond, body] : s.branches) {
    if (Eval(*cond).Truthy()) {
      flow = Exec(body, out);
      return;
    }
  }
  flow = Exec(s.else_body, out);
}

void Evaluator::Bind(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.Set(targets[0], v);
    return;
  }
  List items = Iterate(v);
  if (items.size() != targets.size()) {
    throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                        std::to_string(targets.size()) + " variables");
  }
  for (size_t i = 0; i < targets.size(); ++i)
    scope.Set(targets[i], items[i]);
}

void Evaluator::ExecFor(const Stmt& s, std::string& out) {
  List items = Iterate(Eval(*s.expr));
  std::shared_ptr<Scope> outer = scope_;
  if (s.filter != nullptr) {
    // `for x in xs if cond`: filter first, so loop.length and loop.last see
    // only the kept items (as in Jinja2).
    List kept;
    for (const Value& item : items) {
      CountIteration();
      auto probe = std::make_shared<Scope>(outer);
      Bind(s.targets, item, *probe);
      scope_ = probe;
      const bool keep = Eval(*s.filter).Truthy();
      scope_ = outer;
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scope_ = std::make_shared<Scope>(outer);
    Exec(s.else_body, out);
    scope_ = outer;
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    CountIteration();
    auto iter_scope = std::make_shared<Scope>(outer);
    Bind(s.targets, items[static_cast<size_t>(i)], *iter_scope);
    if (s.uses_loop) SetLoopObject(*iter_scope, items, i);
    scope_ = iter_scope;
    Flow f = Flow::kNormal;
    try {
      f = Exec(s.body, out);
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    if (f == Flow::kBreak) break;
  }
}

void Evaluator::SetLoopObject(Scope& scope, const List& items, int64_t i) {
  const auto n = static_cast<int64_t>(items.size());
  Dict loop;  // keys are distinct: append without the lookup Set() does
  loop.items.reserve(12);
  loop.items.emplace_back(Value::Str("index0"), Value::Int(i));
  loop.items.emplace_back(Value::Str("index"), Value::Int(i + 1));
  loop.items.emplace_back(Value::Str("revindex0"), Value::Int(n - i - 1));
  loop.items.emplace_back(Value::Str("revindex"), Value::Int(n - i));
  loop.items.emplace_back(Value::Str("first"), Value::Bool(i == 0));
  loop.items.emplace_back(Value::Str("last"), Value::Bool(i == n - 1));
  loop.items.emplace_back(Value::Str("length"), Value::Int(n));
  loop.items.emplace_back(Value::Str("depth"), Value::Int(1));
  loop.items.emplace_back(Value::Str("depth0"), Value::Int(0));
  loop.items.emplace_back(Value::Str("previtem"), i > 0
                                                      ? items[static_cast<size_t>(i - 1)]
                                                      : Value::Undef("there is no previous item"));
  loop.items.emplace_back(Value::Str("nextitem"), i + 1 < n
                                                      ? items[static_cast<size_t>(i + 1)]
                                                      : Value::Undef("there is no next item"));
  loop.items.emplace_back(
      Value::Str("cycle"),
      Value::MakeCallable("loop.cycle", [i](Evaluator&, CallArgs& args) -> Value {
        if (args.positional.empty()) throw TemplateError("no items for cycling given");
        return args.positional[static_cast<size_t>(i) % args.positional.size()];
      }));
  scope.Set("loop", Value::MakeDict(std::move(loop)));
}

void Evaluator::ExecSet(const Stmt& s) {
  Value v = Eval(*s.expr);
  if (s.attr_target != nullptr) {
    const Value target = Eval(*s.attr_target);
    if (!target.is_namespace()) {
      throw TemplateError("cannot assign attribute '" + s.name + "' on a " + target.TypeName() +
                          " (only namespace() objects can be changed)");
    }
    target.namespace_attrs().Set(Value::Str(s.name), std::move(v));
    return;
  }
  Bind(s.targets, v, *scope_);
}

std::string Evaluator::RenderBodyIn(const Body& body, std::shared_ptr<Scope> scope) {
  std::shared_ptr<Scope> saved = scope_;
  scope_ = std::move(scope);
  std::string out;
  Flow f = Flow::kNormal;
  try {
    f = Exec(body, out);
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  (void)f;  // a break/continue inside a captured body ends the capture
  return out;
}

Value Evaluator::ApplyCaptureFilter(const Expr& chain, std::string captured) {
  auto tmp = std::make_shared<Scope>(scope_);
  tmp->Set("", Value::Str(std::move(captured)));
  std::shared_ptr<Scope> saved = scope_;
  scope_ = tmp;
  Value result;
  try {
    result = Eval(chain);
  } catch (...) {
    scope_ = saved;
    throw;
  }
  scope_ = saved;
  return result;
}

void Evaluator::ExecSetBlock(const Stmt& s) {
  std::string text = RenderBodyIn(s.body, std::make_shared<Scope>(scope_));
  Value captured = s.expr != nullptr ? ApplyCaptureFilter(*s.expr, std::move(text))
                                     : Value::Str(std::move(text));
  scope_->Set(s.targets[0], std::move(captured));
}

Value Evaluator::MakeMacro(const Stmt& s, std::shared_ptr<Scope> defining) {
  // The macro keeps its defining scope only weakly: the scope owns the macro,
  // and a strong reference back would leak both.
  std::weak_ptr<Scope> weak = defining;
  const Stmt* stmt = &s;
  return Value::MakeCallable(s.name, [stmt, weak](Evaluator& ev, CallArgs& args) -> Value {
    std::shared_ptr<Scope> parent = weak.lock();
    if (parent == nullptr) throw TemplateError("macro '" + stmt->name + "' is out of scope");
    if (args.positional.size() > stmt->params.size()) {
      throw TemplateError("macro '" + stmt->name + "' takes not more than " +
                          std::to_string(stmt->params.size()) + " argument(s)");
    }
    if (++ev.call_depth_ > kMaxNestingDepth) {
      --ev.call_depth_;
      throw TemplateError("macro calls nested more than " + std::to_string(kMaxNestingDepth) +
                          " deep (runaway recursion?)");
    }
    auto scope = std::make_shared<Scope>(parent);
    std::string out;
    try {
      for (size_t i = 0; i < stmt->params.size(); ++i) {
        const auto& [pname, def] = stmt->params[i];
        const Value* kw = nullptr;
        for (const auto& [k, v] : args.keyword) {
          if (k == pname) kw = &v;
        }
        if (i < args.positional.size()) {
          if (kw != nullptr) {
            throw TemplateError("macro '" + stmt->name + "' got multiple values for '" + pname +
                                "'");
          }
          scope->Set(pname, args.positional[i]);
        } else if (kw != nullptr) {
          scope->Set(pname, *kw);
        } else if (def != nullptr) {
          std::shared_ptr<Scope> saved = ev.scope_;
          ev.scope_ = scope;
          Value dv;
          try {
            dv = ev.Eval(*def);
          } catch (...) {
            ev.scope_ = saved;
            throw;
          }
          ev.scope_ = saved;
          scope->Set(pname, dv);
        } else {
          scope->Set(pname, Value::Undef("parameter '" + pname + "' was not provided"));
        }
      }
      for (const auto& [k, v] : args.keyword) {
        bool known = k == "caller";
        for (const auto& p : stmt->params)
          known = known || p.first == k;
        if (!known) {
          throw TemplateError("macro '" + stmt->name + "' takes no keyword argument '" + k + "'");
        }
        if (k == "caller") scope->Set("caller", v);
      }
      out = ev.RenderBodyIn(stmt->body, scope);
    } catch (...) {
      --ev.call_depth_;
      throw;
    }
    --ev.call_depth_;
    return Value::Str(std::move(out));
  });
}

void Evaluator::ExecCallBlock(const Stmt& s, std::string& out) {
  Value caller = MakeMacro(s, scope_);
  const Expr& call = *s.expr;
  Value callee = Eval(*call.children[0]);
  CallArgs args = EvalArgs(call, 1);
  args.keyword.emplace_back("caller", caller);
  out += Call(callee, args).Str();
  CheckSize(out.size());
}

}  // namespace medq::chat
