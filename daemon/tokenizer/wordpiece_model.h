// WordPiece (BERT-style embedding models): greedy longest-match-first with a
// continuing-subword prefix ("##").
#pragma once

#include "daemon/tokenizer/model.h"

namespace medq::tokenizer {

class WordPieceModel : public Model {
 public:
  // Failure (kInvalidRequest) when unk_token is not in vocab.
  static Result<std::unique_ptr<WordPieceModel>> Create(Vocab vocab, std::string unk_token,
                                                        std::string continuing_subword_prefix,
                                                        size_t max_input_chars_per_word);

  // A word longer than max_input_chars_per_word characters, or one that
  // cannot be covered by vocabulary pieces, becomes the single unk token.
  void Tokenize(std::string_view word, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  size_t IdLimit() const override { return vocab_r_.size(); }

 private:
  WordPieceModel() = default;
  Vocab vocab_;
  std::vector<const std::string*> vocab_r_;  // points into vocab_
  int32_t unk_id_ = 0;
  std::string prefix_;
  size_t max_chars_ = 100;
};

}  // namespace medq::tokenizer
