#include "daemon/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {

Result<std::unique_ptr<BpeModel>> BpeModel::Create(
    Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
    BpeOptions options) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  m->vocab_ = std::move(vocab);
  m->vocab_r_ = ReverseVocab(m->vocab_);
  m->options_ = std::move(options);
  const size_t prefix_len = m->options_.continuing_subword_prefix.size();
  m->merges_.Reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = m->vocab_.Find(a);
    const auto ib = m->vocab_.Find(b);
    if (!ia || !ib) {
      return Error(ErrorCode::kInvalidRequest, "model BPE: merge " + std::to_string(rank) + " (\"" +
                                                   a + "\", \"" + b +
                                                   "\") names a token missing from the vocab");
    }
    std::string merged = a;
    merged.append(b.size() >= prefix_len &&
                          b.compare(0, prefix_len, m->options_.continuing_subword_prefix) == 0
                      ? b.substr(prefix_len)
                      : b);
    const auto inew = m->vocab_.Find(merged);
    if (!inew) {
      return Error(ErrorCode::kInvalidRequest, "model BPE: merge " + std::to_string(rank) +
                                                   " produces \"" + merged +
                                                   "\", which is missing from the vocab");
    }
    m->merges_.Put(PairKey(*ia, *ib), MergeInfo{static_cast<int32_t>(rank), *inew});
  }
  if (m->options_.unk_token) {
    m->unk_id_ = m->vocab_.Find(*m->options_.unk_token);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m->byte_fallback_ids_[b] = m->vocab_.Find(std::string_view(name)).value_or(-1);
  }
  return m;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  return vocab_.Find(token);
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_r_.size()) return nullptr;
  return vocab_r_[static_cast<size_t>(id)];
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = vocab_.Find(word)) {
      ids.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() < kMaxCachedWordBytes;
  if (cacheable) {
    MutexLock lock(cache_mu_);
    if (const auto it = cache_.find(word); it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  MergeWord(word, ids);
  if (cacheable) {
    MutexLock lock(cache_mu_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word),
                   std::vector<int32_t>(ids.begin() + static_cast<ptrdiff_t>(first), ids.end()));
  }
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct QueuedMerge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue is a max-heap: invert so the lowest rank, then the
  // leftmost position, comes first.
  bool operator<(const QueuedMerge& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>& ids) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&symbols](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  // Pending unknown character(s), fused when fuse_unk.
  bool pending_unk = false;
  std::string buf;
  size_t i = 0;
  while (i < word.size()) {
    size_t len = 1;
    DecodeAt(word, i, &len);
    const bool is_first = i == 0;
    const bool is_last = i + len >= word.size();
    std::string_view s = word.substr(i, len);
    if ((!is_first && !options_.continuing_subword_prefix.empty()) ||
        (is_last && !options_.end_of_word_suffix.empty())) {
      buf.clear();
      if (!is_first) buf += options_.continuing_subword_prefix;
      buf.append(s);
      if (is_last) buf += options_.end_of_word_suffix;
      s = buf;
    }
    i += len;
    if (const auto id = vocab_.Find(s)) {
      if (pending_unk) add(*unk_id_);
      pending_unk = false;
      add(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : s)
        all = all && byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : s)
          add(byte_fallback_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !options_.fuse_unk) add(*unk_id_);
      pending_unk = true;
    }
    // Without an unk token in the vocab the character is dropped (the Rust
    // library fails the whole encode instead; dropping never crashes).
  }
  if (pending_unk) add(*unk_id_);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::vector<QueuedMerge> heap_storage;
  heap_storage.reserve(symbols.size());
  std::priority_queue<QueuedMerge> queue(std::less<QueuedMerge>(), std::move(heap_storage));
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const MergeInfo* m = merges_.Find(PairKey(symbols[k].id, symbols[k + 1].id))) {
      queue.push({m->rank, static_cast<int32_t>(k), m->new_id});
    }
  }
  while (!queue.empty()) {
    const QueuedMerge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[static_cast<size_t>(top.pos)];
    if (!cur.alive || cur.next < 0) continue;
    const auto next_pos = static_cast<size_t>(cur.next);
    const MergeInfo* m = merges_.Find(PairKey(cur.id, symbols[next_pos].id));
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    symbols[next_pos].alive = false;
    cur.next = symbols[next_pos].next;
    if (cur.next >= 0) symbols[static_cast<size_t>(cur.next)].prev = top.pos;
    if (cur.prev >= 0) {
      const MergeInfo* p = merges_.Find(PairKey(symbols[static_cast<size_t>(cur.prev)].id, cur.id));
      if (p != nullptr) queue.push({p->rank, cur.prev, p->new_id});
    }
    if (cur.next >= 0) {
      const MergeInfo* n = merges_.Find(PairKey(cur.id, symbols[static_cast<size_t>(cur.next)].id));
      if (n != nullptr) queue.push({n->rank, top.pos, n->new_id});
    }
  }
  for (const auto& s : symbols) {
    if (s.alive) ids.push_back(s.id);
  }
}

}  // namespace medq::tokenizer
