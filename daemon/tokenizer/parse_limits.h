// Limits that keep parsing a hostile tokenizer.json from exhausting the stack.
#pragma once

namespace medq::tokenizer {

// Deepest Sequence nesting accepted in a component: parsing recurses once per
// level.
inline constexpr int kMaxNesting = 32;

}  // namespace medq::tokenizer
