// The one exception type used inside medq_template. It never leaves the
// library: ChatTemplate converts it to medq::Error (kInvalidRequest) with the
// line and column where the template went wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace medq::chat {

// A position in the template source; line and column are 1-based, 0 = unknown.
struct SourcePos {
  int line = 0;
  int column = 0;
};

class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& message, SourcePos pos = {})
      : std::runtime_error(message), pos_(pos) {}
  SourcePos pos() const { return pos_; }
  bool has_pos() const { return pos_.line > 0; }

 private:
  SourcePos pos_;
};

// Limits that keep a hostile or broken template from exhausting the stack,
// memory or time.
inline constexpr int kMaxNestingDepth = 128;              // parser and macro recursion
inline constexpr int kMaxEvalDepth = 1024;                // evaluator recursion in total
inline constexpr int kMaxJsonDepth = 256;                 // input values (messages, tools)
inline constexpr size_t kMaxOutputBytes = 64u << 20;      // rendered text
inline constexpr int64_t kMaxLoopIterations = 1'000'000;  // all loops of one render
inline constexpr int64_t kMaxRange = 100'000;             // range(), as Jinja2's sandbox

}  // namespace medq::chat
