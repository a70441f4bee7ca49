// Streaming detokenization: text for generated ids as they arrive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/tokenizer/tokenizer.h"

namespace medq::tokenizer {

// Turns ids pushed one at a time into text pieces such that
//  - every piece is valid UTF-8 and never ends inside a character that later
//    ids complete (an incomplete sequence is held back, not sent as U+FFFD),
//  - the concatenation of all Push() results and Finish() equals
//    tokenizer.Decode(all ids, skip_special_tokens).
// Text that later ids may still change (a trailing U+FFFD, the start of a
// clean-up pattern such as " n" before "'t", a run of <0xNN> byte pieces) is
// held back until it is stable.
// Each Push decodes only a short window of recent ids, so a long generation
// costs linear time.
//
// Not thread-safe: one instance per stream. The tokenizer must outlive it.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Adds id; returns the newly stable text (possibly empty).
  std::string Push(int32_t id);
  // Ends the stream; returns all text still held back.
  std::string Finish();

 private:
  std::string DecodeWindow() const;
  size_t StableEnd(const std::string& text) const;
  void MoveWindow();

  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // ids since the window start (skipped specials left out)
  // Decode(ids_) as far as it has been accounted for: the window's context
  // text (emitted before the window moved) plus what was emitted since.
  std::string window_text_;
};

}  // namespace medq::tokenizer
