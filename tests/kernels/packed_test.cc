// The packed bf16 kernels (PackBf16Tiles, MatRowsPackedInto; the layout and
// the contract: dense_kernels.h, packed_bf16): every output is the k-order
// chain of fused multiply-adds over the row-major matrix, bitwise, for any
// number of x rows, shape, bias and kernel table. That one sum is what makes
// a batched decode step over packed weights batch-invariant, and the tables
// agree with each other.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/linear.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

struct PackedShape {
  int64_t out;
  int64_t in;
};

// out below, at and past a tile (16 rows) and split across threads; in odd
// and even (the kernels take two columns a step).
const std::vector<PackedShape>& PackedShapes() {
  static const std::vector<PackedShape> shapes = {
      {1, 1},   {3, 7},    {16, 2},    {15, 33},   {17, 16},   {31, 5},
      {33, 64}, {64, 576}, {257, 130}, {1000, 33}, {40, 1537}, {2051, 40},
  };
  return shapes;
}

std::vector<uint16_t> Bits(const torch::Tensor& bf16) {
  std::vector<uint16_t> bits(static_cast<size_t>(bf16.numel()));
  std::memcpy(bits.data(), bf16.data_ptr(), bits.size() * sizeof(uint16_t));
  return bits;
}

float Bf16(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &widened, sizeof(f));
  return f;
}

std::vector<uint16_t> Pack(const std::vector<uint16_t>& w, int64_t out, int64_t in) {
  std::vector<uint16_t> packed(static_cast<size_t>(kernels::PackedBf16Elements(out, in)), 0xFFFF);
  kernels::PackBf16Tiles(w.data(), out, in, packed.data());
  return packed;
}

TEST_CASE("PackBf16Tiles puts rows j and 8 + j of a tile in lane j and zero past the end",
          "[linear][packed]") {
  const int64_t out = 19, in = 3;
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<uint16_t>(i + 1);
  const std::vector<uint16_t> packed = Pack(w, out, in);
  REQUIRE(packed.size() == static_cast<size_t>(32 * in));  // two tiles
  for (int64_t r = 0; r < 32; ++r) {
    const int64_t tile = r / 16, j = r % 16;
    const int64_t position = j < 8 ? 2 * j : 2 * (j - 8) + 1;
    for (int64_t k = 0; k < in; ++k) {
      INFO("row " << r << " column " << k);
      const uint16_t want = r < out ? w[static_cast<size_t>(r * in + k)] : 0;
      CHECK(packed[static_cast<size_t>((tile * in + k) * 16 + position)] == want);
    }
  }
}

// Skipped (not passed) on a CPU without the table: another table would run.
void CheckChains(Tables tables) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  const std::string kernels = ActiveKernelsName();
  torch::manual_seed(11);
  for (const PackedShape& s : PackedShapes()) {
    const std::vector<uint16_t> w = Bits(torch::randn({s.out, s.in}).to(torch::kBFloat16));
    const std::vector<uint16_t> packed = Pack(w, s.out, s.in);
    for (bool with_bias : {false, true}) {
      const torch::Tensor bias = torch::randn({s.out});
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m = 1; m <= 9; ++m) {
        INFO(s.out << "x" << s.in << (with_bias ? " bias" : "") << " " << kernels << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        const float* xp = x.data_ptr<float>();
        std::vector<float> y(static_cast<size_t>(m * s.out), -1.0f);
        kernels::MatRowsPackedInto(packed.data(), s.out, s.in, xp, m, bp, y.data());
        int64_t wrong = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t r = 0; r < s.out; ++r) {
            float sum = 0.0f;
            for (int64_t k = 0; k < s.in; ++k)
              sum = std::fma(Bf16(w[static_cast<size_t>(r * s.in + k)]), xp[i * s.in + k], sum);
            const float want = bp != nullptr ? sum + bp[r] : sum;
            const float got = y[static_cast<size_t>(i * s.out + r)];
            if (std::memcmp(&want, &got, sizeof(float)) != 0) ++wrong;
          }
        }
        REQUIRE(wrong == 0);
      }
    }
  }
}

TEST_CASE("packed bf16 rows are the k-order FMA chains bitwise, AVX-512VL", "[linear][packed]") {
  CheckChains(Tables::kAvx512);
}
TEST_CASE("packed bf16 rows are the k-order FMA chains bitwise, AVX2", "[linear][packed]") {
  CheckChains(Tables::kAvx2);
}
TEST_CASE("packed bf16 rows are the k-order FMA chains bitwise, scalar", "[linear][packed]") {
  CheckChains(Tables::kScalar);
}

}  // namespace
}  // namespace medq::engine
