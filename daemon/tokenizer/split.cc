#include "daemon/tokenizer/split.h"

#include <algorithm>

namespace medq::tokenizer {

std::vector<Span> SpansFromMatches(size_t text_size,
                                   const std::vector<std::pair<size_t, size_t>>& matches) {
  std::vector<Span> spans;
  if (text_size == 0) {
    spans.push_back({0, 0, false});
    return spans;
  }
  spans.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != text_size) spans.push_back({prev, text_size, false});
  return spans;
}

void SplitPiece(const Piece& piece, std::vector<Span> spans, SplitBehavior behavior, bool invert,
                std::vector<Piece>& out) {
  if (invert) {
    for (auto& s : spans)
      s.is_match = !s.is_match;
  }
  // After this, is_match means "drop this span".
  std::vector<Span> result;
  result.reserve(spans.size());
  switch (behavior) {
    case SplitBehavior::kRemoved:
      result = std::move(spans);
      break;
    case SplitBehavior::kIsolated:
      for (auto& s : spans)
        result.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match && !previous_match) {
          if (!result.empty()) {
            result.back().end = s.end;
          } else {
            result.push_back({s.begin, s.end, false});
          }
        } else {
          result.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match) {
          if (!result.empty()) {
            result.back().begin = it->begin;
          } else {
            result.push_back({it->begin, it->end, false});
          }
        } else {
          result.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(result.begin(), result.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !result.empty()) {
          result.back().end = s.end;
        } else {
          result.push_back({s.begin, s.end, false});
        }
        previous_match = s.is_match;
      }
      break;
    }
  }
  for (const auto& s : result) {
    if (s.is_match || s.end <= s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_origin && s.begin == 0});
  }
}

}  // namespace medq::tokenizer
