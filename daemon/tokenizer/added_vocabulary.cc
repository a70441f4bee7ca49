#include "daemon/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

int32_t TokenMatcher::Child(int32_t node, unsigned char b) const {
  const auto& ch = nodes_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(ch.begin(), ch.end(), b,
                                   [](const auto& p, unsigned char v) { return p.first < v; });
  return it != ch.end() && it->first == b ? it->second : -1;
}

void TokenMatcher::Add(std::string_view pattern, int32_t index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const auto b = static_cast<unsigned char>(c);
    int32_t next = Child(node, b);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      auto& ch = nodes_[static_cast<size_t>(node)].children;
      ch.insert(std::lower_bound(ch.begin(), ch.end(), b,
                                 [](const auto& p, unsigned char v) { return p.first < v; }),
                {b, next});
    }
    node = next;
  }
  // The first token with a given content wins, as in the Rust trie build.
  if (nodes_[static_cast<size_t>(node)].token_index < 0) {
    nodes_[static_cast<size_t>(node)].token_index = index;
  }
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

namespace {

// Code point that ends at byte `end` of s (end > 0).
char32_t LastChar(std::string_view s, size_t end, size_t* start) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80)
    --b;
  size_t len = 1;
  *start = b;
  return DecodeAt(s, b, &len);
}

}  // namespace

void TokenMatcher::Split(std::string_view text, bool text_at_origin,
                         const std::vector<AddedToken>& tokens, std::vector<Segment>& out) const {
  size_t start_offset = 0;  // end of the previous accepted match
  const auto emit_text = [&](size_t b, size_t e) {
    if (e > b)
      out.push_back({false, 0, std::string(text.substr(b, e - b)), text_at_origin && b == 0});
  };
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      node = Child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token_index >= 0) {
        best = nodes_[static_cast<size_t>(node)].token_index;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens[static_cast<size_t>(best)];
    size_t start = pos;
    size_t stop = best_end;
    if (tok.single_word) {
      size_t unused = 0;
      const bool start_ok = start == 0 || !IsAlphanumeric(LastChar(text, start, &unused));
      size_t len = 1;
      const bool stop_ok = stop == text.size() || !IsAlphanumeric(DecodeAt(text, stop, &len));
      if (!start_ok || !stop_ok) {
        // Not a whole word here. Like the Rust matcher's iterator, resume
        // after this match (matches never overlap).
        pos = best_end;
        continue;
      }
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t prev = 0;
        if (!IsWhitespace(LastChar(text, s, &prev))) break;
        s = prev;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t len = 1;
        if (!IsWhitespace(DecodeAt(text, stop, &len))) break;
        stop += len;
      }
    }
    emit_text(start_offset, start);
    out.push_back({true, tok.id, std::string(), false});
    start_offset = stop;
    pos = stop;
  }
  emit_text(start_offset, text.size());
}

}  // namespace medq::tokenizer
