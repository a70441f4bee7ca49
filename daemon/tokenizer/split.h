// Splitting a text piece into sub-pieces, with the Hugging Face
// SplitDelimiterBehavior semantics shared by several pre-tokenizers.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace medq::tokenizer {

// A pre-token. at_origin is true when the piece begins at offset 0 of the
// original input (Metaspace's prepend_scheme "first" needs it).
struct Piece {
  std::string text;
  bool at_origin = false;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A span of the text being split, and whether it is a delimiter match.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

// Covers text with spans from its matches (as Rust's Pattern::find_matches:
// one non-match span between matches, and [(0,0), false] for empty text).
std::vector<Span> SpansFromMatches(size_t text_size,
                                   const std::vector<std::pair<size_t, size_t>>& matches);

// Spans where every character for which pred is true is its own match.
template <typename Pred>
std::vector<Span> SpansFromCharPredicate(std::string_view text, Pred pred);

// Applies behavior (and invert) to spans of piece and appends the non-empty
// resulting pieces to out.
void SplitPiece(const Piece& piece, std::vector<Span> spans, SplitBehavior behavior, bool invert,
                std::vector<Piece>& out);

}  // namespace medq::tokenizer

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

template <typename Pred>
std::vector<Span> SpansFromCharPredicate(std::string_view text, Pred pred) {
  std::vector<Span> spans;
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return spans;
  }
  size_t last = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t len = 1;
    const char32_t c = DecodeAt(text, i, &len);
    if (pred(c)) {
      if (last < i) spans.push_back({last, i, false});
      spans.push_back({i, i + len, true});
      last = i + len;
    }
    i += len;
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
  return spans;
}

}  // namespace medq::tokenizer
