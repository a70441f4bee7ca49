// Byte-pair encoding, as the Hugging Face `BPE` model: byte-level vocabularies
// (GPT-2, Llama 3, Qwen) and SentencePiece-style ones with byte_fallback
// (Llama 2, Mistral).
#pragma once

#include <array>
#include <unordered_map>

#include "common/mutex.h"
#include "daemon/tokenizer/model.h"

namespace medq::tokenizer {

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel : public Model {
 public:
  // merges: pairs of tokens in rank order. Failure (kInvalidRequest) when a
  // merge names a token, or produces one, that is not in vocab.
  static Result<std::unique_ptr<BpeModel>> Create(
      Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      BpeOptions options);

  void Tokenize(std::string_view word, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  const std::string* IdToToken(int32_t id) const override;
  size_t IdLimit() const override { return vocab_r_.size(); }

 private:
  BpeModel() = default;
  void MergeWord(std::string_view word, std::vector<int32_t>& ids) const;

  struct MergeInfo {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  Vocab vocab_;
  std::vector<const std::string*> vocab_r_;  // points into vocab_
  FlatU64Map<MergeInfo> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  std::array<int32_t, 256> byte_fallback_ids_{};

  // Cache of recent words (each < kMaxCachedWordBytes), cleared when full.
  static constexpr size_t kMaxCachedWordBytes = 256;
  static constexpr size_t kCacheCapacity = 10000;
  mutable Mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_
      GUARDED_BY(cache_mu_);
};

}  // namespace medq::tokenizer
