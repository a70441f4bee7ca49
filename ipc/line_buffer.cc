#include "ipc/line_buffer.h"

namespace medq::ipc {

bool LineBuffer::Append(std::string_view bytes) {
  if (overflowed_) return false;
  // Drop consumed lines before growing, so the buffer stays bounded by about
  // one maximum line plus one read.
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    scan_ -= start_;
    start_ = 0;
  }
  buffer_.append(bytes);
  // Every complete line must fit, and so must the partial line at the end.
  size_t line_begin = start_;
  for (size_t pos = scan_; pos < buffer_.size(); ++pos) {
    if (buffer_[pos] == '\n') {
      if (pos - line_begin > max_line_) overflowed_ = true;
      line_begin = pos + 1;
    }
  }
  if (buffer_.size() - line_begin > max_line_) overflowed_ = true;
  return !overflowed_;
}

std::optional<std::string> LineBuffer::NextLine() {
  if (overflowed_) return std::nullopt;
  size_t nl = buffer_.find('\n', scan_);
  if (nl == std::string::npos) {
    scan_ = buffer_.size();
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_, nl - start_);
  start_ = nl + 1;
  scan_ = start_;
  return line;
}

std::optional<std::string> LineBuffer::TakeFinalLine() {
  if (overflowed_ || !HasPartialLine() || buffer_.find('\n', scan_) != std::string::npos) {
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_);
  start_ = scan_ = buffer_.size();
  return line;
}

}  // namespace medq::ipc
