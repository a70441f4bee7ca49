// A compiled Unicode regular expression (PCRE2 with JIT, UTF and UCP), used by
// the Split pre-tokenizer and the Replace normalizer/decoder.
//
// Patterns in tokenizer.json are written for Oniguruma (Rust tokenizers) and
// the Rust `regex` crate; Compile() translates the differences that matter:
// `\s`/`\S` also cover U+0085 (NEL) as Unicode White_Space does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace medq::tokenizer {

class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Compiles pattern. Failure: kInvalidRequest naming the pattern and PCRE2's
  // message. The result is immutable and may be used from any thread.
  static Result<std::unique_ptr<Regex>> Compile(std::string_view pattern);

  // Every non-overlapping match in text, left to right, as [begin, end) byte
  // offsets. Empty matches are reported too; the scan then moves one
  // character on, as Oniguruma and Rust do. Precondition: text is valid UTF-8.
  // If PCRE2 gives up (resource limits), the rest of text is treated as not
  // matching; this never crashes.
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  struct Impl;
  std::string pattern_;
  std::unique_ptr<Impl> impl_;
};

// The pattern with Oniguruma / Rust-regex specifics rewritten for PCRE2.
std::string TranslatePattern(std::string_view pattern);

}  // namespace medq::tokenizer
