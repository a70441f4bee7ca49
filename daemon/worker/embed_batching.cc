#include "daemon/worker/embed_batching.h"

#include <algorithm>
#include <numeric>

namespace medq::daemon {

double PaddingFraction(const std::vector<int64_t>& lengths) {
  if (lengths.empty()) return 0;
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const int64_t real = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  const auto slots = static_cast<double>(longest) * static_cast<double>(lengths.size());
  return slots > 0 ? 1.0 - static_cast<double>(real) / slots : 0;
}

std::vector<size_t> PlanBatch(const std::vector<int64_t>& lengths, const BatchLimits& limits) {
  if (lengths.empty()) return {};
  // The texts by length (ties by age); the batch is a window of this order
  // that holds the oldest text and grows one neighbour at a time.
  std::vector<size_t> by_length(lengths.size());
  std::iota(by_length.begin(), by_length.end(), size_t{0});
  std::stable_sort(by_length.begin(), by_length.end(),
                   [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
  const size_t oldest_at = static_cast<size_t>(
      std::find(by_length.begin(), by_length.end(), size_t{0}) - by_length.begin());
  size_t lo = oldest_at;      // window [lo, hi)
  size_t hi = oldest_at + 1;  // of by_length
  int64_t sum = lengths[0];
  const auto max_batch = static_cast<size_t>(std::max(1, limits.max_batch));
  // Padding of the window with `len` added; the window's range is
  // [lengths[by_length[lo]], lengths[by_length[hi - 1]]].
  auto padding_with = [&](int64_t len) {
    const int64_t longest = std::max(len, lengths[by_length[hi - 1]]);
    const auto slots = static_cast<double>(longest) * static_cast<double>(hi - lo + 1);
    return 1.0 - static_cast<double>(sum + len) / slots;
  };
  while (hi - lo < max_batch) {
    const bool can_lo = lo > 0 && padding_with(lengths[by_length[lo - 1]]) <= limits.max_padding;
    const bool can_hi =
        hi < by_length.size() && padding_with(lengths[by_length[hi]]) <= limits.max_padding;
    if (!can_lo && !can_hi) break;
    // The neighbour that widens the range least; on a tie the shorter one,
    // which pads only itself, where a longer one pads everyone already in.
    bool take_hi = can_hi;
    if (can_lo && can_hi) {
      const int64_t grow_lo = lengths[by_length[lo]] - lengths[by_length[lo - 1]];
      const int64_t grow_hi = lengths[by_length[hi]] - lengths[by_length[hi - 1]];
      take_hi = grow_hi == 0 || grow_hi < grow_lo;
    }
    if (take_hi) {
      sum += lengths[by_length[hi++]];
    } else {
      sum += lengths[by_length[--lo]];
    }
  }
  std::vector<size_t> batch(by_length.begin() + static_cast<std::ptrdiff_t>(lo),
                            by_length.begin() + static_cast<std::ptrdiff_t>(hi));
  std::sort(batch.begin(), batch.end());
  return batch;
}

}  // namespace medq::daemon
