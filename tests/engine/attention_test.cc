// Attention() over a prompt or a chunk of one (attention.h): transformers'
// eager attention in double as the reference, over grouped query heads,
// chunks at an offset and sliding windows, for every path this LibTorch
// takes (the fused kernels, one masked call, or 1.13's blocks of queries);
// and with blocks, a query's result the same bits however the prompt is cut
// into chunks of a multiple of the block.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "daemon/engine/attention.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

constexpr int64_t kHeads = 6, kKvHeads = 2, kDim = 16;

// softmax((q · kᵀ) / sqrt(D), masked) · v in double, head h reading kv head
// h / (heads / kv_heads); query i at position start + i sees keys j <= start
// + i, within `window` when set.
at::Tensor Reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t start,
                     std::optional<int64_t> window) {
  const int64_t t = q.size(2), s = k.size(2), group = kHeads / kKvHeads;
  const at::Tensor kk = k.to(at::kDouble).repeat_interleave(group, 1);
  const at::Tensor vv = v.to(at::kDouble).repeat_interleave(group, 1);
  at::Tensor scores = at::matmul(q.to(at::kDouble), kk.transpose(-1, -2)) / std::sqrt(double{kDim});
  at::Tensor allowed = at::empty({t, s}, at::kBool);
  auto a = allowed.accessor<bool, 2>();
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < s; ++j)
      a[i][j] = j <= start + i && (!window || start + i - j < *window);
  }
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), vv);
}

struct Case {
  int64_t start, t;
  std::optional<int64_t> window;
};

TEST_CASE("attention over a prompt equals transformers' eager attention", "[attention]") {
  at::manual_seed(70);
  // One query; a block and one more; several blocks, from position 0 and at
  // offsets on and off a block's start; windows shorter than a block, than
  // the chunk, and longer than everything.
  const Case cases[] = {
      {0, 1, {}},    {0, 50, {}},   {0, 64, {}},    {0, 65, {}},    {0, 200, {}},
      {37, 1, {}},   {37, 100, {}}, {128, 128, {}}, {100, 300, {}}, {0, 200, 48},
      {150, 90, 48}, {0, 200, 100}, {64, 256, 100}, {30, 70, 1000},
  };
  for (const Case& c : cases) {
    INFO("start " << c.start << ", " << c.t << " queries, window "
                  << (c.window ? std::to_string(*c.window) : "none") << ", query block "
                  << AttentionQueryBlock());
    const int64_t s = c.start + c.t;
    const at::Tensor q = at::randn({1, kHeads, c.t, kDim});
    const at::Tensor k = at::randn({1, kKvHeads, s, kDim});
    const at::Tensor v = at::randn({1, kKvHeads, s, kDim});
    const AttentionPlan plan = PlanAttention(c.start, c.t, c.window, at::kCPU);
    const at::Tensor got = Attention(q, k, v, plan);
    REQUIRE(got.sizes() == q.sizes());
    const at::Tensor want = Reference(q, k, v, c.start, c.window);
    const double error = (got.to(at::kDouble) - want).abs().max().item<double>();
    CHECK(error < 1e-5);
  }
}

TEST_CASE("attention in blocks gives a query the same bits in any chunking", "[attention]") {
  const int64_t block = AttentionQueryBlock();
  if (block == 0) MEDQ_SKIP("this LibTorch scores a chunk's queries at once, in no blocks");
  at::manual_seed(71);
  const int64_t t = 6 * block;
  const at::Tensor q = at::randn({1, kHeads, t, kDim});
  const at::Tensor k = at::randn({1, kKvHeads, t, kDim});
  const at::Tensor v = at::randn({1, kKvHeads, t, kDim});
  for (const std::optional<int64_t> window :
       {std::optional<int64_t>{}, std::optional<int64_t>{90}}) {
    const at::Tensor whole = Attention(q, k, v, PlanAttention(0, t, window, at::kCPU));
    // Chunks of one, two and three blocks, each against the keys so far.
    for (const int64_t chunk : {block, 2 * block, 3 * block}) {
      for (int64_t start = 0; start < t; start += chunk) {
        INFO("chunks of " << chunk << ", from " << start << ", window "
                          << (window ? std::to_string(*window) : "none"));
        const int64_t n = std::min(chunk, t - start);
        const at::Tensor part =
            Attention(q.narrow(2, start, n).contiguous(), k.narrow(2, 0, start + n),
                      v.narrow(2, 0, start + n), PlanAttention(start, n, window, at::kCPU));
        const at::Tensor expected = whole.narrow(2, start, n).contiguous();
        REQUIRE(std::memcmp(part.contiguous().data_ptr<float>(), expected.data_ptr<float>(),
                            static_cast<size_t>(expected.numel()) * sizeof(float)) == 0);
      }
    }
  }
}

}  // namespace
}  // namespace medq::engine
