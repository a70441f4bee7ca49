// Renders a parsed template: walks the statements, evaluates expressions with
// Python/Jinja2 semantics and writes the output. One Evaluator serves one
// render on one thread; the parsed template it reads is shared and immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "daemon/template/ast.h"
#include "daemon/template/scope.h"
#include "daemon/template/value.h"

namespace medq::chat {

class Evaluator {
 public:
  // `globals` holds the template variables (messages, bos_token...) and the
  // global functions; the template's own top-level `set`s go to a child scope.
  Evaluator(const ParsedTemplate& tmpl, std::shared_ptr<Scope> globals);
  // Empties every namespace the render created: a namespace can contain
  // itself (`set ns.me = ns`), and that reference cycle would leak.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders the whole template. Throws TemplateError (with the position of
  // the failing expression or statement) on any error.
  std::string Render();

  // Evaluates an expression in the current scope.
  Value Eval(const Expr& e);
  // Calls a callable value; throws if `callee` is not callable.
  Value Call(const Value& callee, CallArgs& args);

  // Counts loop iterations and output growth against the render's limits.
  void CountIteration();
  static void CheckSize(size_t bytes);

  // Records a namespace created during this render (see ~Evaluator).
  void TrackNamespace(const Value& ns) { namespaces_.push_back(ns); }

  // The position of the construct being evaluated, for error messages.
  SourcePos pos() const { return pos_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, std::string& out);
  Flow ExecStmt(const Stmt& s, std::string& out);
  void ExecIf(const Stmt& s, std::string& out, Flow& flow);
  void ExecFor(const Stmt& s, std::string& out);
  // Binds `loop` (index, first, last, previtem, cycle...) for item `i`.
  static void SetLoopObject(Scope& scope, const List& items, int64_t i);
  void ExecSet(const Stmt& s);
  void ExecSetBlock(const Stmt& s);
  // Evaluates a filter chain whose innermost operand is the placeholder name
  // "" bound to `captured` (set blocks with filters, filter blocks).
  Value ApplyCaptureFilter(const Expr& chain, std::string captured);
  void ExecCallBlock(const Stmt& s, std::string& out);
  Value MakeMacro(const Stmt& s, std::shared_ptr<Scope> defining);
  std::string RenderBodyIn(const Body& body, std::shared_ptr<Scope> scope);
  void Bind(const std::vector<std::string>& targets, const Value& v, Scope& scope);

  Value EvalAttr(const Expr& e);
  Value EvalItem(const Expr& e);
  Value EvalSlice(const Expr& e);
  Value EvalCall(const Expr& e);
  Value EvalFilter(const Expr& e);
  bool EvalTest(const Expr& e);
  CallArgs EvalArgs(const Expr& e, size_t first_child);

  // Counts the evaluator's own recursion (expressions, statements, macro
  // bodies) so that macros recursing into deep expressions cannot exhaust
  // the thread's stack.
  class DepthGuard {
   public:
    explicit DepthGuard(Evaluator& ev) : ev_(ev) {
      if (++ev_.eval_depth_ > kMaxEvalDepth) {
        --ev_.eval_depth_;
        throw TemplateError("template evaluation nested more than " +
                            std::to_string(kMaxEvalDepth) + " levels deep");
      }
    }
    ~DepthGuard() { --ev_.eval_depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Evaluator& ev_;
  };

  const ParsedTemplate& tmpl_;
  std::shared_ptr<Scope> scope_;
  SourcePos pos_;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int64_t iterations_ = 0;
  std::vector<Value> namespaces_;
};

// Attribute and item access with Jinja2's sandboxed semantics: a missing
// attribute or key gives Undefined; using an Undefined's attribute throws.
Value GetAttr(const Value& obj, const std::string& name);
Value GetItem(const Value& obj, const Value& key);

// Binary operators with Python semantics ("+", "-", "*", "/", "//", "%",
// "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in").
Value BinaryOp(const std::string& op, const Value& a, const Value& b);

// Throws the error an Undefined stands for (e.g. "'x' is undefined").
[[noreturn]] void FailUndefined(const Value& v);

}  // namespace medq::chat
