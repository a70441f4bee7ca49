// Open-addressing hash tables for the vocabulary and the merge ranks. They
// are filled once at load time and then only read, so they need no deletion;
// a flat layout keeps lookups (the hot path of BPE) to one or two cache misses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace medq::tokenizer {

// string -> int32_t. Not thread-safe to modify; concurrent Find() is fine.
class FlatStringMap {
 public:
  void Reserve(size_t n);
  // Inserts key -> value; returns false (keeping the old value) when key is
  // already present.
  bool Insert(std::string key, int32_t value);
  std::optional<int32_t> Find(std::string_view key) const;
  size_t size() const { return entries_.size(); }
  // Entries in insertion order.
  const std::vector<std::pair<std::string, int32_t>>& entries() const { return entries_; }

 private:
  static uint64_t Hash(std::string_view s);
  void Rehash(size_t capacity);
  // Each slot: upper 32 bits a hash tag, lower 32 bits entry index + 1
  // (0 = empty).
  std::vector<uint64_t> slots_;
  std::vector<std::pair<std::string, int32_t>> entries_;
};

// uint64_t -> V (V trivially copyable).
template <typename V>
class FlatU64Map {
 public:
  void Reserve(size_t n) { Rehash(CapacityFor(n)); }
  // Inserts or overwrites.
  void Put(uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(CapacityFor(size_ + 1));
    size_t i = Mix(key) & (slots_.size() - 1);
    while (slots_[i].used && slots_[i].key != key)
      i = (i + 1) & (slots_.size() - 1);
    if (!slots_[i].used) ++size_;
    slots_[i] = {key, value, true};
  }
  const V* Find(uint64_t key) const {
    if (slots_.empty()) return nullptr;
    size_t i = Mix(key) & (slots_.size() - 1);
    while (slots_[i].used) {
      if (slots_[i].key == key) return &slots_[i].value;
      i = (i + 1) & (slots_.size() - 1);
    }
    return nullptr;
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
    bool used = false;
  };
  static size_t CapacityFor(size_t n) {
    size_t c = 16;
    while (c < n * 2)
      c *= 2;
    return c;
  }
  static uint64_t Mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void Rehash(size_t capacity) {
    if (capacity <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    size_ = 0;
    for (const auto& s : old) {
      if (s.used) Put(s.key, s.value);
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace medq::tokenizer
