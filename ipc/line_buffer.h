// Frames a byte stream into newline-terminated lines with a maximum length.
// Used by the daemon for every connection and by clients for replies.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace medq::ipc {

// Not thread-safe; one per stream.
class LineBuffer {
 public:
  // `max_line_bytes` bounds a line without its newline.
  explicit LineBuffer(size_t max_line_bytes) : max_line_(max_line_bytes) {}

  // Appends bytes read from the stream. Returns false when the line being
  // assembled exceeds the maximum; the buffer is then poisoned: it hands out
  // no more lines, and the stream should be closed after an error reply.
  bool Append(std::string_view bytes);

  // The next complete line without its "\n" (a trailing "\r" is kept: the
  // protocol's lines end in "\n" only), or nullopt until one is complete.
  std::optional<std::string> NextLine();

  // At the end of the stream: the bytes after the last newline, as a final
  // line (a last line need not end in "\n"), or nullopt when there are none.
  std::optional<std::string> TakeFinalLine();

  // True when bytes of an incomplete line are buffered.
  bool HasPartialLine() const { return buffer_.size() > start_; }
  bool overflowed() const { return overflowed_; }

 private:
  size_t max_line_;
  std::string buffer_;
  size_t start_ = 0;  // where the first unconsumed line begins
  size_t scan_ = 0;   // bytes before this offset hold no newline
  bool overflowed_ = false;
};

}  // namespace medq::ipc
