#include "daemon/tokenizer/flat_map.h"

namespace medq::tokenizer {

uint64_t FlatStringMap::Hash(std::string_view s) {
  // FNV-1a over 8-byte words, then a final mix: fast for short tokens.
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w = 0;
    for (size_t k = 0; k < 8; ++k)
      w |= static_cast<uint64_t>(static_cast<unsigned char>(s[i + k])) << (8 * k);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i)
    h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

void FlatStringMap::Reserve(size_t n) {
  entries_.reserve(n);
  size_t c = 16;
  while (c < n * 2)
    c *= 2;
  Rehash(c);
}

void FlatStringMap::Rehash(size_t capacity) {
  if (capacity <= slots_.size()) return;
  slots_.assign(capacity, 0);
  const size_t mask = capacity - 1;
  for (size_t e = 0; e < entries_.size(); ++e) {
    const uint64_t h = Hash(entries_[e].first);
    size_t i = h & mask;
    while (slots_[i] != 0)
      i = (i + 1) & mask;
    slots_[i] = (h & 0xFFFFFFFF00000000ull) | static_cast<uint64_t>(e + 1);
  }
}

bool FlatStringMap::Insert(std::string key, int32_t value) {
  if ((entries_.size() + 1) * 2 > slots_.size()) {
    Rehash(slots_.empty() ? 16 : slots_.size() * 2);
  }
  const uint64_t h = Hash(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i] != 0) {
    if ((slots_[i] >> 32) == (h >> 32) && entries_[(slots_[i] & 0xFFFFFFFFu) - 1].first == key) {
      return false;
    }
    i = (i + 1) & mask;
  }
  entries_.emplace_back(std::move(key), value);
  slots_[i] = (h & 0xFFFFFFFF00000000ull) | static_cast<uint64_t>(entries_.size());
  return true;
}

std::optional<int32_t> FlatStringMap::Find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t h = Hash(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i] != 0) {
    if ((slots_[i] >> 32) == (h >> 32)) {
      const auto& e = entries_[(slots_[i] & 0xFFFFFFFFu) - 1];
      if (e.first == key) return e.second;
    }
    i = (i + 1) & mask;
  }
  return std::nullopt;
}

}  // namespace medq::tokenizer
