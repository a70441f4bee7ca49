// Expressions: literals, names, containers, access, calls, filters, tests
// and operators.
#include <cmath>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/text_util.h"

namespace medq::chat {

Value Evaluator::Eval(const Expr& e) {
  DepthGuard guard(*this);
  try {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = scope_->Lookup(e.name);
        if (v == nullptr) return Value::Undef("'" + e.name + "' is undefined");
        return *v;
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        List items;
        items.reserve(e.children.size());
        for (const auto& c : e.children)
          items.push_back(Eval(*c));
        if (e.kind == Expr::Kind::kTuple) return Value::MakeTuple(std::move(items));
        return Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value k = Eval(*e.children[i]);
          d.Set(std::move(k), Eval(*e.children[i + 1]));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Kind::kGetAttr:
        return EvalAttr(e);
      case Expr::Kind::kGetItem:
        return EvalItem(e);
      case Expr::Kind::kSlice:
        return EvalSlice(e);
      case Expr::Kind::kCall:
        return EvalCall(e);
      case Expr::Kind::kFilter:
        return EvalFilter(e);
      case Expr::Kind::kTest:
        return Value::Bool(EvalTest(e));
      case Expr::Kind::kNot:
        return Value::Bool(!Eval(*e.children[0]).Truthy());
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        const Value v = Eval(*e.children[0]);
        if (v.is_undefined()) FailUndefined(v);
        const bool neg = e.kind == Expr::Kind::kNeg;
        if (v.is_float()) return Value::Float(neg ? -v.as_float() : v.as_float());
        if (v.is_int() || v.is_bool()) {
          const int64_t i = v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
          if (neg && i == INT64_MIN) throw TemplateError("integer overflow");
          return Value::Int(neg ? -i : i);
        }
        throw TemplateError(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" +
                            v.TypeName() + "'");
      }
      case Expr::Kind::kBinary: {
        const Value a = Eval(*e.children[0]);
        const Value b = Eval(*e.children[1]);
        return BinaryOp(e.name, a, b);
      }
      case Expr::Kind::kAnd: {
        Value a = Eval(*e.children[0]);
        if (!a.Truthy()) return a;
        return Eval(*e.children[1]);
      }
      case Expr::Kind::kOr: {
        Value a = Eval(*e.children[0]);
        if (a.Truthy()) return a;
        return Eval(*e.children[1]);
      }
      case Expr::Kind::kCond: {
        if (Eval(*e.children[1]).Truthy()) return Eval(*e.children[0]);
        if (e.children[2] != nullptr) return Eval(*e.children[2]);
        return Value::Undef("the inline if-expression on line " + std::to_string(e.pos.line) +
                            " evaluated to false and no else section was defined");
      }
    }
  } catch (const TemplateError& err) {
    if (!err.has_pos()) throw TemplateError(err.what(), e.pos);
    throw;
  }
  return Value();
}

Value Evaluator::EvalAttr(const Expr& e) {
  return GetAttr(Eval(*e.children[0]), e.name);
}

Value Evaluator::EvalItem(const Expr& e) {
  const Value obj = Eval(*e.children[0]);
  return GetItem(obj, Eval(*e.children[1]));
}

namespace {

// Python slice index normalization (PySlice_AdjustIndices).
void AdjustSlice(int64_t len, const Value& start_v, const Value& stop_v, const Value& step_v,
                 int64_t& start, int64_t& stop, int64_t& step) {
  auto as_index = [](const Value& v, const char* what) -> int64_t {
    if (v.is_int()) return v.as_int();
    if (v.is_bool()) return v.as_bool() ? 1 : 0;
    throw TemplateError(std::string("slice ") + what + " must be an integer or None, not " +
                        v.TypeName());
  };
  const bool no_step = step_v.is_none() || step_v.is_undefined();
  step = no_step ? 1 : as_index(step_v, "step");
  if (step == 0) throw TemplateError("slice step cannot be zero");
  const bool no_start = start_v.is_none() || start_v.is_undefined();
  const bool no_stop = stop_v.is_none() || stop_v.is_undefined();
  if (no_start) {
    start = step < 0 ? len - 1 : 0;
  } else {
    start = as_index(start_v, "start");
    if (start < 0) start = std::max<int64_t>(start + len, step < 0 ? -1 : 0);
    if (start >= len) start = step < 0 ? len - 1 : len;
  }
  if (no_stop) {
    stop = step < 0 ? -1 : len;
  } else {
    stop = as_index(stop_v, "stop");
    if (stop < 0) stop = std::max<int64_t>(stop + len, step < 0 ? -1 : 0);
    if (stop >= len) stop = step < 0 ? len - 1 : len;
  }
}

}  // namespace

Value Evaluator::EvalSlice(const Expr& e) {
  const Value obj = Eval(*e.children[0]);
  Value parts[3];
  for (int i = 0; i < 3; ++i) {
    parts[i] = e.children[static_cast<size_t>(i) + 1] != nullptr
                   ? Eval(*e.children[static_cast<size_t>(i) + 1])
                   : Value::None();
  }
  if (obj.is_undefined()) FailUndefined(obj);
  if (obj.is_dict()) throw TemplateError("unhashable type: 'slice'");
  std::vector<char32_t> cps;
  const List* list = nullptr;
  int64_t len = 0;
  if (obj.is_string()) {
    cps = DecodeUtf8(obj.as_string());
    len = static_cast<int64_t>(cps.size());
  } else if (obj.is_list()) {
    list = &obj.as_list();
    len = static_cast<int64_t>(list->size());
  } else {
    // Jinja2 slices with Python's own subscript (not its forgiving getitem),
    // so slicing anything but a list, tuple or string is a TypeError.
    std::string msg(1, '\'');  // appended: GCC 12 -Wrestrict misfires on "'" + string
    msg.append(obj.TypeName()).append("' object is not subscriptable");
    throw TemplateError(msg);
  }
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  AdjustSlice(len, parts[0], parts[1], parts[2], start, stop, step);
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    idx.push_back(i);
  if (list != nullptr) {
    List out;
    out.reserve(idx.size());
    for (int64_t i : idx)
      out.push_back((*list)[static_cast<size_t>(i)]);
    return obj.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeList(std::move(out));
  }
  std::string out;
  for (int64_t i : idx)
    AppendUtf8(cps[static_cast<size_t>(i)], out);
  return Value::Str(std::move(out));
}

CallArgs Evaluator::EvalArgs(const Expr& e, size_t first_child) {
  CallArgs args;
  for (size_t i = first_child; i < e.children.size(); ++i) {
    args.positional.push_back(Eval(*e.children[i]));
  }
  for (const auto& [k, v] : e.kwargs)
    args.keyword.emplace_back(k, Eval(*v));
  return args;
}

Value Evaluator::EvalCall(const Expr& e) {
  const Value callee = Eval(*e.children[0]);
  CallArgs args = EvalArgs(e, 1);
  return Call(callee, args);
}

Value Evaluator::Call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) FailUndefined(callee);
  if (!callee.is_callable()) {
    throw TemplateError("'" + callee.TypeName() + "' object is not callable");
  }
  const Callable& c = callee.as_callable();
  return c.fn(*this, args);
}

Value Evaluator::EvalFilter(const Expr& e) {
  const Value input = Eval(*e.children[0]);
  CallArgs args = EvalArgs(e, 1);
  return ApplyFilter(*this, e.name, input, args);
}

bool Evaluator::EvalTest(const Expr& e) {
  const Value input = Eval(*e.children[0]);
  CallArgs args = EvalArgs(e, 1);
  const bool r = ApplyTest(*this, e.name, input, args);
  return e.negated ? !r : r;
}

}  // namespace medq::chat
