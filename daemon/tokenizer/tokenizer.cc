#include "daemon/tokenizer/tokenizer.h"

#include "daemon/tokenizer/decoder.h"
#include "daemon/tokenizer/model.h"
#include "daemon/tokenizer/normalizer.h"
#include "daemon/tokenizer/post_processor.h"
#include "daemon/tokenizer/pre_tokenizer.h"
#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::EncodeText(std::string text, bool at_origin, std::vector<int32_t>& ids) const {
  std::vector<Piece> pieces;
  pieces.push_back({std::move(text), at_origin});
  if (pre_tokenizer_ != nullptr) pre_tokenizer_->PreTokenize(pieces);
  for (const auto& p : pieces) {
    if (!p.text.empty()) model_->Tokenize(p.text, ids);
  }
}

void Tokenizer::EncodeSequence(std::string_view input, std::vector<int32_t>& ids) const {
  const std::string text = SanitizeUtf8(input);
  // 1. Added tokens that match the raw text.
  std::vector<Segment> segments;
  if (raw_matcher_.empty()) {
    if (!text.empty()) segments.push_back({false, 0, text, true});
  } else {
    raw_matcher_.Split(text, true, added_, segments);
  }
  // 2. Normalize each text segment, then split out normalized added tokens.
  for (auto& seg : segments) {
    if (seg.is_token) {
      ids.push_back(seg.id);
      continue;
    }
    if (normalizer_ != nullptr) normalizer_->Normalize(seg.text);
    if (normalized_matcher_.empty()) {
      EncodeText(std::move(seg.text), seg.at_origin, ids);
      continue;
    }
    std::vector<Segment> inner;
    normalized_matcher_.Split(seg.text, seg.at_origin, added_, inner);
    for (auto& s : inner) {
      if (s.is_token) {
        ids.push_back(s.id);
      } else {
        EncodeText(std::move(s.text), s.at_origin, ids);
      }
    }
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  EncodeSequence(text, ids);
  if (post_processor_ == nullptr) return ids;
  return post_processor_->Process(ids, nullptr, add_special_tokens);
}

std::vector<int32_t> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                           bool add_special_tokens) const {
  std::vector<int32_t> ia;
  std::vector<int32_t> ib;
  EncodeSequence(a, ia);
  EncodeSequence(b, ib);
  if (post_processor_ == nullptr) {
    ia.insert(ia.end(), ib.begin(), ib.end());
    return ia;
  }
  return post_processor_->Process(ia, &ib, add_special_tokens);
}

const AddedToken* Tokenizer::FindAdded(int32_t id) const {
  const auto it = added_by_id_.find(id);
  return it == added_by_id_.end() ? nullptr : &added_[it->second];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const AddedToken* t = FindAdded(id); t != nullptr) {
      if (!(skip_special_tokens && t->special)) tokens.push_back(t->content);
      continue;
    }
    if (const std::string* s = model_->IdToToken(id); s != nullptr) tokens.push_back(*s);
  }
  std::string text;
  if (decoder_ != nullptr) {
    decoder_->DecodeChain(tokens);
    for (const auto& t : tokens)
      text += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) text.push_back(' ');
      text += tokens[i];
    }
  }
  // Pieces taken verbatim (no ByteLevel decoder) may hold invalid bytes.
  if (!IsValidUtf8(text)) text = SanitizeUtf8(text);
  if (clean_up_spaces_) text = CleanUpTokenization(std::move(text));
  return text;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const auto it = added_by_content_.find(std::string(token)); it != added_by_content_.end()) {
    return it->second;
  }
  return model_->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  if (const AddedToken* t = FindAdded(id); t != nullptr) return t->content;
  const std::string* s = model_->IdToToken(id);
  return s == nullptr ? std::string() : *s;
}

std::optional<std::string> Tokenizer::TokenBytes(int32_t id) const {
  if (const AddedToken* t = FindAdded(id); t != nullptr) return t->content;
  const std::string* s = model_->IdToToken(id);
  if (s == nullptr) return std::nullopt;
  std::string bytes = *s;
  if (decoder_ != nullptr) decoder_->PieceBytes(bytes);
  return bytes;
}

size_t Tokenizer::VocabSize() const {
  size_t n = model_->IdLimit();
  for (const auto& t : added_)
    n = std::max(n, static_cast<size_t>(t.id) + 1);
  return n;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  const AddedToken* t = FindAdded(id);
  return t != nullptr && t->special;
}

}  // namespace medq::tokenizer
