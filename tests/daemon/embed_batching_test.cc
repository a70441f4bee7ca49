// The embedding batcher's choice of texts (worker/embed_batching.h).
#include <catch2/catch.hpp>

#include <algorithm>

#include "daemon/worker/embed_batching.h"

namespace medq::daemon {
namespace {

std::vector<int64_t> LengthsOf(const std::vector<int64_t>& lengths,
                               const std::vector<size_t>& batch) {
  std::vector<int64_t> out;
  for (size_t i : batch)
    out.push_back(lengths[i]);
  return out;
}

}  // namespace

TEST_CASE("PlanBatch: similar lengths fill the batch up to max_batch, the oldest first") {
  const std::vector<int64_t> lengths(40, 12);
  const auto batch = PlanBatch(lengths, {32, 0.25});
  REQUIRE(batch.size() == 32);
  CHECK(batch.front() == 0);
  CHECK(batch.back() == 31);  // ties go by age
  CHECK(PlanBatch(lengths, {1, 0.25}) == std::vector<size_t>{0});
}

TEST_CASE("PlanBatch: very different lengths go in different batches") {
  // Short texts and 128-token ones, interleaved.
  std::vector<int64_t> lengths;
  for (int i = 0; i < 10; ++i) {
    lengths.push_back(8 + i % 3);
    lengths.push_back(128 - i % 2);
  }
  const auto batch = PlanBatch(lengths, {32, 0.25});
  CHECK(batch.front() == 0);  // the oldest, a short one
  for (int64_t n : LengthsOf(lengths, batch))
    CHECK(n <= 10);
  CHECK(batch.size() == 10);
  CHECK(PaddingFraction(LengthsOf(lengths, batch)) <= 0.25);

  // The oldest is long: every long one goes in its batch (a short one may
  // ride along while the padding stays under the limit).
  std::vector<int64_t> rotated(lengths.begin() + 1, lengths.end());
  rotated.push_back(lengths.front());
  const auto long_batch = PlanBatch(rotated, {32, 0.25});
  CHECK(long_batch.front() == 0);
  const auto long_lengths = LengthsOf(rotated, long_batch);
  CHECK(std::count_if(long_lengths.begin(), long_lengths.end(),
                      [](int64_t n) { return n >= 127; }) == 10);
  CHECK(PaddingFraction(long_lengths) <= 0.25);
}

TEST_CASE("PlanBatch: padding stays within the limit, whatever the mix") {
  std::vector<int64_t> lengths;
  uint32_t x = 12345;
  for (int i = 0; i < 300; ++i) {
    x = x * 1664525u + 1013904223u;
    lengths.push_back(2 + static_cast<int64_t>((x >> 8) % 254));
  }
  for (double limit : {0.0, 0.1, 0.25, 0.5}) {
    std::vector<int64_t> pending = lengths;
    size_t served = 0;
    while (!pending.empty()) {
      const auto batch = PlanBatch(pending, {16, limit});
      REQUIRE(!batch.empty());
      CHECK(batch.front() == 0);
      CHECK(batch.size() <= 16);
      CHECK(std::is_sorted(batch.begin(), batch.end()));
      CHECK(PaddingFraction(LengthsOf(pending, batch)) <= limit + 1e-12);
      for (auto it = batch.rbegin(); it != batch.rend(); ++it)
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(*it));
      served += batch.size();
    }
    CHECK(served == lengths.size());
  }
}

TEST_CASE("PlanBatch: an empty list gives an empty batch, and the padding of a batch") {
  CHECK(PlanBatch({}, {32, 0.25}).empty());
  CHECK(PaddingFraction({}) == 0);
  CHECK(PaddingFraction({4, 4}) == 0);
  CHECK(PaddingFraction({2, 4}) == Approx(0.25));
}

}  // namespace medq::daemon
