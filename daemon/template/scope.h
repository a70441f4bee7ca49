// Variable scopes of one render. Lookups walk up to the globals; `set`
// writes to the innermost scope, so (as in Jinja2) assignments inside a for
// loop body do not leak out of it, while those inside `if` do.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/template/value.h"

namespace medq::chat {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}

  // The value bound to `name` here or in an enclosing scope; nullptr if none.
  const Value* Lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
      for (const auto& [k, v] : s->vars_) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }

  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars_) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars_.emplace_back(name, std::move(v));
  }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

}  // namespace medq::chat
