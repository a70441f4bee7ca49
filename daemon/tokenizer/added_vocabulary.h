// Added tokens (tokenizer.json "added_tokens"): matched in the input before
// the normalizer and the model run, by leftmost-longest match, with the
// Hugging Face lstrip / rstrip / single_word / normalized semantics.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace medq::tokenizer {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// One piece of a split input: an added token's id, or text between tokens.
struct Segment {
  bool is_token = false;
  int32_t id = 0;
  std::string text;
  bool at_origin = false;  // text begins at offset 0 of the original input
};

// Leftmost-longest matcher over a fixed set of strings (a byte trie).
class TokenMatcher {
 public:
  // Adds pattern (not empty) that stands for tokens[index].
  void Add(std::string_view pattern, int32_t index);
  // Splits text around matches of the patterns, with the tokens' strip and
  // single-word rules; text segments keep at_origin only for the first one
  // when text_at_origin. Empty text segments are dropped.
  void Split(std::string_view text, bool text_at_origin, const std::vector<AddedToken>& tokens,
             std::vector<Segment>& out) const;
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token_index = -1;
  };
  int32_t Child(int32_t node, unsigned char b) const;
  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> first_byte_{};
};

}  // namespace medq::tokenizer
