#include "daemon/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code != nullptr) pcre2_code_free(code);
  }
};

Regex::~Regex() = default;

std::string TranslatePattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (n == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out.push_back(c);
        out.push_back(n);
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out.push_back('^');
        ++i;
      }
      if (i + 1 < p.size() && p[i + 1] == ']') {
        out += "\\]";
        ++i;
      }
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      // POSIX class such as [:alpha:] inside a class: copy through to ":]".
      const size_t end = p.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(p.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

Result<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern) {
  std::unique_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  re->impl_ = std::make_unique<Impl>();
  const std::string translated = TranslatePattern(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  re->impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (re->impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return Error(ErrorCode::kInvalidRequest, "cannot compile regex \"" + std::string(pattern) +
                                                 "\" at offset " + std::to_string(err_off) + ": " +
                                                 reinterpret_cast<const char*>(msg));
  }
  re->impl_->jit = pcre2_jit_compile(re->impl_->code, PCRE2_JIT_COMPLETE) == 0;
  return re;
}

namespace {

// Per-call matching resources; the compiled code itself is shared. The JIT
// stack is only made when the default 32 KiB machine stack proves too small
// (long runs of a repeated group), since creating one maps memory.
class MatchState {
 public:
  explicit MatchState(const pcre2_code* code) {
    data_ = pcre2_match_data_create_from_pattern(code, nullptr);
  }
  ~MatchState() {
    if (stack_ != nullptr) pcre2_jit_stack_free(stack_);
    if (context_ != nullptr) pcre2_match_context_free(context_);
    pcre2_match_data_free(data_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  pcre2_match_data* data() { return data_; }
  pcre2_match_context* context() { return context_; }

  // Switches to an 8 MiB JIT stack; false when that is not possible.
  bool GrowStack() {
    if (stack_ != nullptr) return false;
    context_ = pcre2_match_context_create(nullptr);
    stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context_ == nullptr || stack_ == nullptr) return false;
    pcre2_jit_stack_assign(context_, nullptr, stack_);
    return true;
  }

 private:
  pcre2_match_data* data_ = nullptr;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (impl_ == nullptr || impl_->code == nullptr) return out;
  MatchState st(impl_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    // Text is valid UTF-8 (the tokenizer sanitizes it), so skip PCRE2's check.
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data(),
                         st.context());
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && st.GrowStack()) {
      rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data(),
                       st.context());
    }
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Fall back to the interpreter, which keeps its backtracking on the heap.
      rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       st.data(), st.context());
    }
    if (rc < 0) break;  // no match, or a resource limit: the rest does not match
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data());
    const size_t b = ov[0];
    const size_t e = ov[1];
    if (e < b) break;  // \K tricks; not used by tokenizer patterns
    out.emplace_back(b, e);
    if (e > b) {
      pos = e;
    } else {
      if (e >= text.size()) break;
      size_t len = 1;
      DecodeAt(text, e, &len);
      pos = e + len;
    }
  }
  return out;
}

}  // namespace medq::tokenizer
