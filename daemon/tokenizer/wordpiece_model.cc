#include "daemon/tokenizer/wordpiece_model.h"

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

Result<std::unique_ptr<WordPieceModel>> WordPieceModel::Create(Vocab vocab, std::string unk_token,
                                                               std::string prefix,
                                                               size_t max_chars) {
  std::unique_ptr<WordPieceModel> m(new WordPieceModel());
  const auto unk = vocab.Find(unk_token);
  if (!unk) {
    return Error(ErrorCode::kInvalidRequest,
                 "model WordPiece: unk_token \"" + unk_token + "\" is not in the vocab");
  }
  m->unk_id_ = *unk;
  m->vocab_ = std::move(vocab);
  m->vocab_r_ = ReverseVocab(m->vocab_);
  m->prefix_ = std::move(prefix);
  m->max_chars_ = max_chars;
  return m;
}

std::optional<int32_t> WordPieceModel::TokenToId(std::string_view token) const {
  return vocab_.Find(token);
}

const std::string* WordPieceModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_r_.size()) return nullptr;
  return vocab_r_[static_cast<size_t>(id)];
}

void WordPieceModel::Tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  // Character boundaries, so that candidate ends shrink one character at a time.
  std::vector<size_t> bounds;
  bounds.reserve(word.size() + 1);
  for (size_t i = 0; i < word.size();) {
    bounds.push_back(i);
    size_t len = 1;
    DecodeAt(word, i, &len);
    i += len;
  }
  bounds.push_back(word.size());
  if (bounds.size() - 1 > max_chars_) {
    ids.push_back(unk_id_);
    return;
  }
  std::vector<int32_t> pieces;
  std::string candidate;
  size_t start = 0;  // index into bounds
  while (start + 1 < bounds.size()) {
    bool found = false;
    for (size_t end = bounds.size() - 1; end > start; --end) {
      const std::string_view sub = word.substr(bounds[start], bounds[end] - bounds[start]);
      candidate.clear();
      if (start > 0) candidate += prefix_;
      candidate.append(sub);
      if (const auto id = vocab_.Find(candidate)) {
        pieces.push_back(*id);
        start = end;
        found = true;
        break;
      }
    }
    if (!found) {
      ids.push_back(unk_id_);
      return;
    }
  }
  ids.insert(ids.end(), pieces.begin(), pieces.end());
}

}  // namespace medq::tokenizer
