#include "daemon/tokenizer/incremental_decoder.h"

namespace medq::tokenizer {
namespace {

constexpr size_t kMaxWindow = 16;  // ids kept before the window moves on
constexpr size_t kContextIds = 4;  // ids kept as context when it does
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// The clean-up rules' patterns (see CleanUpTokenization); a text ending in a
// proper prefix of one may still change.
constexpr std::string_view kCleanUpPatterns[] = {" .",   " ?",  " !",  " ,",   " ' ",
                                                 " n't", " 'm", " 's", " 've", " 're"};

bool IsByteFallbackToken(const std::string& t) {
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>';
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_(skip_special_tokens) {}

std::string IncrementalDecoder::DecodeWindow() const {
  return tokenizer_.Decode(ids_, skip_special_);
}

size_t IncrementalDecoder::StableEnd(const std::string& text) const {
  size_t end = text.size();
  // A trailing U+FFFD may be an incomplete character that later ids complete.
  while (end >= window_text_.size() + kReplacementChar.size() &&
         text.compare(end - kReplacementChar.size(), kReplacementChar.size(), kReplacementChar) ==
             0) {
    end -= kReplacementChar.size();
  }
  if (tokenizer_.CleansUpSpaces()) {
    // Hold back from the earliest space that starts a possible pattern.
    for (size_t back = 4; back >= 1; --back) {
      if (end < back || end - back < window_text_.size()) continue;
      const std::string_view tail(text.data() + end - back, back);
      bool prefix = false;
      for (const auto p : kCleanUpPatterns) {
        if (p.size() > back && p.compare(0, back, tail) == 0) prefix = true;
      }
      if (prefix) {
        end -= back;
        break;
      }
    }
  }
  return end;
}

void IncrementalDecoder::MoveWindow() {
  // Keep a few ids as context so that first-token rules (Strip, Metaspace)
  // apply to text already emitted; never start on a <0xNN> piece, whose bytes
  // combine with their neighbours.
  size_t start = ids_.size() - kContextIds;
  while (start > 0 && IsByteFallbackToken(tokenizer_.IdToToken(ids_[start])))
    --start;
  if (start == 0) return;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(start));
  window_text_ = DecodeWindow();
}

std::string IncrementalDecoder::Push(int32_t id) {
  if (skip_special_ && tokenizer_.IsSpecial(id)) return std::string();
  ids_.push_back(id);
  // A run of <0xNN> pieces decodes to its text only if the whole run is
  // valid UTF-8 (otherwise one U+FFFD per byte), so nothing in it is stable
  // until a different token ends the run.
  if (IsByteFallbackToken(tokenizer_.IdToToken(id))) return std::string();
  const std::string text = DecodeWindow();
  if (text.compare(0, window_text_.size(), window_text_) != 0) {
    return std::string();  // earlier text is still changing; wait for more ids
  }
  const size_t end = StableEnd(text);
  if (end <= window_text_.size()) return std::string();
  std::string out = text.substr(window_text_.size(), end - window_text_.size());
  window_text_.append(out);
  if (end == text.size() && ids_.size() > kMaxWindow) MoveWindow();
  return out;
}

std::string IncrementalDecoder::Finish() {
  const std::string text = DecodeWindow();
  std::string out;
  if (text.size() > window_text_.size() &&
      text.compare(0, window_text_.size(), window_text_) == 0) {
    out = text.substr(window_text_.size());
  }
  ids_.clear();
  window_text_.clear();
  return out;
}

}  // namespace medq::tokenizer
