// The int4 weight kernels (groups of 32 to 128 weights with a bf16 scale and
// minimum each, dense_kernels.h MatVecI4Fn): the layout read back by an
// independent unpacking, x's int8 blocks (PrepareI4Rows) against an independent
// quantization, every SIMD table bitwise equal to the scalar reference, the
// several-row kernel bitwise the one-row kernel per row (batch invariance),
// and Linear()'s int4 paths against at::linear on the dequantized matrix
// and x as quantized.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/linear.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/kernels/rounded_x.h"
#include "tests/support/skip.h"

// A namespace of its own: the unity build puts this file beside int8_test.cc.
namespace medq::engine::int4_test {
namespace {

struct Int4Shape {
  int64_t out;
  int64_t in;
  int64_t group;
};

// in from one block to real widths: spans of 16 blocks whole (512, 1024,
// 1536) and with the last one 1 to 15 blocks long (the kernels' masked
// tail, in each half of it), every group size, and outputs large enough to
// be split across threads.
const std::vector<Int4Shape>& Int4Shapes() {
  static const std::vector<Int4Shape> shapes = {
      {1, 32, 32},    {3, 64, 32},   {5, 96, 32},    {4, 128, 64},   {7, 128, 128},
      {9, 192, 64},   {2, 160, 32},  {1000, 64, 64}, {64, 576, 64},  {40, 896, 128},
      {257, 320, 32}, {3, 1536, 64}, {2051, 64, 32}, {24, 4864, 64}, {6, 512, 128},
      {5, 1024, 32},  {3, 992, 32},  {4, 544, 32},   {2, 768, 128},
  };
  return shapes;
}

// Random nibbles and group parameters: positive scales of a few orders of
// magnitude and minimums of either sign, as QuantizeRowsInt4 makes them.
struct Int4Weight {
  torch::Tensor packed;  // uint8 [out, in / 2]
  torch::Tensor params;  // bf16 [out, in / group, 2]
};
Int4Weight RandomInt4(const Int4Shape& s) {
  Int4Weight w;
  w.packed = torch::randint(0, 256, {s.out, s.in / 2}).to(torch::kByte);
  const torch::Tensor scale = torch::rand({s.out, s.in / s.group, 1}).mul_(0.01).add_(1e-4);
  const torch::Tensor min = torch::randn({s.out, s.in / s.group, 1}).mul_(0.05);
  w.params = torch::cat({scale, min}, 2).to(torch::kBFloat16).contiguous();
  return w;
}

// Where byte j of block b of a row `in` wide lies, written here from the
// layout's text (dense_kernels.h): spans of 16 blocks, 256 bytes each (the
// last one n blocks); byte j = 4t + u of the span's block l at 4n·t + 4l +
// u, or at 16l + j in a span of fewer than 8 blocks.
int64_t Int4ByteAt(int64_t in, int64_t b, int64_t j) {
  const int64_t span = b / 16, n = std::min<int64_t>(16, in / 32 - 16 * span), l = b % 16;
  return 256 * span + (n >= 8 ? 4 * n * (j / 4) + 4 * l + j % 4 : 16 * l + j);
}

// The dequantized matrix in double, unpacked here from the layout: byte j of
// a block of 32 holds weight j low, j + 16 high.
torch::Tensor DequantizedDouble(const Int4Weight& w) {
  const int64_t out = w.packed.size(0), in = 2 * w.packed.size(1);
  const int64_t group = in / w.params.size(1);
  const torch::Tensor p = w.params.to(torch::kDouble);
  torch::Tensor d = torch::empty({out, in}, torch::kDouble);
  const auto bytes = w.packed.accessor<uint8_t, 2>();
  const auto pa = p.accessor<double, 3>();
  auto da = d.accessor<double, 2>();
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t b = 0; b < in / 32; ++b) {
      for (int64_t j = 0; j < 16; ++j) {
        const uint8_t byte = bytes[r][Int4ByteAt(in, b, j)];
        for (const auto& [k, q] : {std::pair<int64_t, int>{32 * b + j, byte & 0xF},
                                   std::pair<int64_t, int>{32 * b + 16 + j, byte >> 4}}) {
          da[r][k] = q * pa[r][k / group][0] + pa[r][k / group][1];
        }
      }
    }
  }
  return d;
}

bool SameBits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

using rounded_x::QuantizedBlock;
using rounded_x::QuantizedXDouble;
QuantizedBlock QuantizeBlock(const float* x) {
  return rounded_x::QuantizeBlock(x, 32);
}

// One table's PrepareI4Rows output for x [m, in].
struct Prepared {
  std::vector<int8_t> q;
  std::vector<float> lane_scale, group_sum;
};
Prepared Prepare(const torch::Tensor& x, int64_t group) {
  const int64_t m = x.size(0), in = x.size(1);
  Prepared p;
  p.q.assign(static_cast<size_t>(m * kernels::I4RowBytes(in)), 99);
  p.lane_scale.assign(static_cast<size_t>(m * kernels::I4RowLaneScales(in)), 99.0f);
  p.group_sum.assign(static_cast<size_t>(m * kernels::I4RowGroupSums(in, group)), 99.0f);
  kernels::PrepareI4Rows(kernels::ActiveKernels().quantize_x_block, x.data_ptr<float>(), m, in,
                         group, p.q.data(), p.lane_scale.data(), p.group_sum.data());
  return p;
}

std::vector<float> RunRows(Tables tables, const Int4Weight& w, const torch::Tensor& x, int64_t m,
                           const float* bias) {
  KernelMode mode(tables);
  std::vector<float> y(static_cast<size_t>(m * w.packed.size(0)), -1.0f);
  kernels::MatRowsInt4Into(w.packed, w.params, x.data_ptr<float>(), m, bias, y.data());
  return y;
}

TEST_CASE("int4 dequantization reads the documented layout, every table", "[linear][int4]") {
  torch::manual_seed(20);
  for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
    KernelMode mode(tables);
    if (ActiveKernelsName() != std::string(TableName(tables))) continue;
    for (const Int4Shape& s : Int4Shapes()) {
      INFO(s.out << "x" << s.in << " group " << s.group << " " << ActiveKernelsName());
      const Int4Weight w = RandomInt4(s);
      const torch::Tensor d = kernels::DequantizeInt4(w.packed, w.params);
      // fma(q, s, m) in float32 is the exact value rounded once.
      const torch::Tensor exact = DequantizedDouble(w);
      REQUIRE(d.to(torch::kDouble).equal(exact.to(torch::kFloat).to(torch::kDouble)));
    }
  }
}

TEST_CASE("PackInt4Row writes the documented layout and Int4CodeOrder reads it back",
          "[linear][int4]") {
  torch::manual_seed(25);
  for (const Int4Shape& s : Int4Shapes()) {
    INFO("in " << s.in);
    const torch::Tensor codes = torch::randint(0, 16, {s.in}).to(torch::kByte);
    const uint8_t* c = codes.data_ptr<uint8_t>();
    std::vector<uint8_t> row(static_cast<size_t>(s.in / 2), 0xAA);
    kernels::PackInt4Row(c, s.in, row.data());
    for (int64_t b = 0; b < s.in / 32; ++b) {
      for (int64_t j = 0; j < 16; ++j) {
        const uint8_t byte = row[static_cast<size_t>(Int4ByteAt(s.in, b, j))];
        REQUIRE((byte & 0xF) == c[32 * b + j]);
        REQUIRE((byte >> 4) == c[32 * b + 16 + j]);
      }
    }
    const std::vector<int64_t> order = kernels::Int4CodeOrder(s.in);
    for (int64_t k = 0; k < s.in; ++k) {
      const int64_t at = order[static_cast<size_t>(k)];
      REQUIRE((row[static_cast<size_t>(at / 2)] >> (4 * (at % 2)) & 0xF) == c[k]);
    }
  }
}

TEST_CASE("PrepareI4Rows writes x's int8 blocks in the documented layout, every table",
          "[linear][int4]") {
  torch::manual_seed(24);
  for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
    KernelMode mode(tables);
    if (ActiveKernelsName() != std::string(TableName(tables))) continue;
    for (const Int4Shape& s : Int4Shapes()) {
      const int64_t m = 3, in = s.in;
      torch::Tensor x = torch::randn({m, in}).mul_(3.0f);
      x[1].narrow(0, 0, 32).zero_();       // a block of zeros: d = 0
      x[2].narrow(0, 0, 32).mul_(1e-32f);  // below 1e-30: d = 0
      const Prepared p = Prepare(x, s.group);
      INFO(s.in << " group " << s.group << " " << ActiveKernelsName());
      const int64_t row_bytes = kernels::I4RowBytes(in), lanes = kernels::I4RowLaneScales(in);
      const int64_t sums = kernels::I4RowGroupSums(in, s.group);
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x.data_ptr<float>() + i * in;
        std::vector<float> group_sum(static_cast<size_t>(sums), 0.0f);
        std::vector<bool> written(static_cast<size_t>(row_bytes), false);
        for (int64_t b = 0; b < in / 32; ++b) {
          const QuantizedBlock q = QuantizeBlock(xi + 32 * b);
          int sum = 0;
          for (int t = 0; t < 32; ++t) {
            // Span b / 16 (n blocks), l = b % 16: value t = 4q + u (q, u <
            // 4) of the low half at 128q + 4l + u, of the high half 64 bytes
            // on; in a span of n < 8, the halves whole at 128 (l / 4) + 16 (l
            // % 4) and 64 bytes on.
            const int64_t l = b % 16, n = std::min<int64_t>(16, in / 32 - (b / 16) * 16);
            const int64_t at = (b / 16) * 512 + (t < 16 ? 0 : 64) +
                               (n >= 8 ? 128 * ((t % 16) / 4) + 4 * l + t % 4
                                       : 128 * (l / 4) + 16 * (l % 4) + t % 16);
            written[static_cast<size_t>(at)] = true;
            REQUIRE(p.q[static_cast<size_t>(i * row_bytes + at)] == q.values[t]);
            REQUIRE(std::abs(q.values[t]) <= 127);
            // Round to nearest: within half a step (and a rounding of x · id);
            // a block below 1e-30 is all zeros.
            const float error = std::fabs(xi[32 * b + t] - q.d * q.values[t]);
            REQUIRE(error <= (q.d > 0.0f ? q.d * 0.5f * 1.0001f : 1e-30f));
            sum += q.values[t];
          }
          REQUIRE(p.lane_scale[static_cast<size_t>(i * lanes + b)] == q.d);
          float& g = group_sum[static_cast<size_t>(32 * b / s.group)];
          g = std::fma(q.d, static_cast<float>(sum), g);
        }
        if (i == 1 || i == 2) REQUIRE(p.lane_scale[static_cast<size_t>(i * lanes)] == 0.0f);
        // Past in: zeros, to a whole span and to a multiple of 16 sums.
        for (int64_t k = 0; k < row_bytes; ++k) {
          if (!written[static_cast<size_t>(k)])
            REQUIRE(p.q[static_cast<size_t>(i * row_bytes + k)] == 0);
        }
        for (int64_t l = in / 32; l < lanes; ++l)
          REQUIRE(p.lane_scale[static_cast<size_t>(i * lanes + l)] == 0.0f);
        REQUIRE(SameBits(p.group_sum.data() + i * sums, group_sum.data(), sums));
      }
    }
  }
}

TEST_CASE("a NaN or an infinity in x makes the int4 product NaN, every table", "[linear][int4]") {
  const Int4Weight w = RandomInt4({5, 128, 64});
  for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      INFO(TableName(tables) << " " << bad);
      torch::Tensor x = torch::randn({2, 128});
      x[1][70] = bad;
      const std::vector<float> y = RunRows(tables, w, x, 2, nullptr);
      for (int64_t r = 0; r < 5; ++r) {
        REQUIRE(std::isfinite(y[static_cast<size_t>(r)]));
        REQUIRE(std::isnan(y[static_cast<size_t>(5 + r)]));
      }
    }
  }
}

// Skipped (not passed) on a CPU without the table: another table would run.
void CheckAgainstScalar(Tables tables, bool vnni) {
  {
    KernelMode mode(tables);
    MEDQ_SKIP_UNLESS_TABLE(tables);
  }
  MEDQ_SKIP_UNLESS_VNNI(tables, vnni);
  VnniMode choice(vnni);
  torch::manual_seed(21);
  for (const Int4Shape& s : Int4Shapes()) {
    const Int4Weight w = RandomInt4(s);
    const torch::Tensor bias = torch::randn({s.out});
    for (bool with_bias : {false, true}) {
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m : {1, 2, 3, 4, 5, 7}) {
        INFO(s.out << "x" << s.in << " group " << s.group << (with_bias ? " bias" : "")
                   << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        const std::vector<float> simd = RunRows(tables, w, x, m, bp);
        const std::vector<float> scalar = RunRows(Tables::kScalar, w, x, m, bp);
        REQUIRE(SameBits(simd.data(), scalar.data(), m * s.out));
      }
    }
  }
  // The largest integer sums: every code 15 against x at ±127 everywhere (a
  // constant row rounds to 127 in every block). AVX2's 16-bit pair sums
  // (int4_avx2.cc) reach 30480 here, just inside int16; a sum that
  // overflowed or saturated would differ from the scalar reference's int32.
  for (const int64_t in : {512, 896}) {
    Int4Weight w = RandomInt4({8, in, 64});
    w.packed.fill_(0xFF);
    for (const float sign : {1.0f, -1.0f}) {
      for (int64_t m : {1, 4}) {
        INFO("every code 15, x " << sign << ", in " << in << " m=" << m);
        const torch::Tensor x = torch::full({m, in}, sign);
        const std::vector<float> simd = RunRows(tables, w, x, m, nullptr);
        const std::vector<float> scalar = RunRows(Tables::kScalar, w, x, m, nullptr);
        REQUIRE(SameBits(simd.data(), scalar.data(), m * 8));
      }
    }
  }
}

TEST_CASE("int4 kernels equal the scalar reference bitwise, AVX-512VL table", "[linear][int4]") {
  CheckAgainstScalar(Tables::kAvx512, true);
}
TEST_CASE("int4 kernels equal the scalar reference bitwise, AVX-512VL table without VNNI",
          "[linear][int4]") {
  CheckAgainstScalar(Tables::kAvx512, false);
}
TEST_CASE("int4 kernels equal the scalar reference bitwise, AVX2 with AVX-VNNI", "[linear][int4]") {
  CheckAgainstScalar(Tables::kAvx2, true);
}
TEST_CASE("int4 kernels equal the scalar reference bitwise, AVX2", "[linear][int4]") {
  CheckAgainstScalar(Tables::kAvx2, false);
}

// Batch invariance: row i of m rows is what the row gives alone.
void CheckRowsAgainstMatVec(Tables tables, bool vnni) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  if (tables != Tables::kScalar) MEDQ_SKIP_UNLESS_VNNI(tables, vnni);
  VnniMode choice(vnni);
  torch::manual_seed(22);
  for (const Int4Shape& s : Int4Shapes()) {
    const Int4Weight w = RandomInt4(s);
    const torch::Tensor bias = torch::randn({s.out});
    for (bool with_bias : {false, true}) {
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m = 1; m <= 9; ++m) {
        INFO(s.out << "x" << s.in << (with_bias ? " bias" : "") << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        std::vector<float> rows(static_cast<size_t>(m * s.out), -1.0f);
        kernels::MatRowsInt4Into(w.packed, w.params, x.data_ptr<float>(), m, bp, rows.data());
        for (int64_t i = 0; i < m; ++i) {
          INFO("row " << i);
          std::vector<float> one(static_cast<size_t>(s.out), -2.0f);
          kernels::MatRowsInt4Into(w.packed, w.params, x.data_ptr<float>() + i * s.in, 1, bp,
                                   one.data());
          REQUIRE(SameBits(rows.data() + i * s.out, one.data(), s.out));
        }
      }
    }
  }
  // A prefill chunk's rows: more x rows than fit one block of x and more
  // weight rows than one run (cpu_linear.cc, ParallelOverBlocks), on 1, 2
  // and 3 threads, so that blocks, runs and chunks all have several parts
  // (41 rows: blocks of 20, 20 and one, which takes the one-row kernel);
  // and 300 rows of 4096, whose prepared x (1.2 MiB) is more than the
  // thread's kept buffer takes.
  struct ManyRows {
    Int4Shape shape;
    int64_t m;
  };
  for (const ManyRows& c : {ManyRows{{1536, 896, 64}, 41}, ManyRows{{8, 4096, 64}, 300}}) {
    const Int4Shape& s = c.shape;
    const Int4Weight w = RandomInt4(s);
    const torch::Tensor x = torch::randn({c.m, s.in});
    for (int threads : {1, 2, 3}) {
      kernels::SetKernelThreads(threads);
      std::vector<float> rows(static_cast<size_t>(c.m * s.out), -1.0f);
      kernels::MatRowsInt4Into(w.packed, w.params, x.data_ptr<float>(), c.m, nullptr, rows.data());
      for (int64_t i = 0; i < c.m; ++i) {
        INFO(s.out << "x" << s.in << ", " << threads << " threads, row " << i);
        std::vector<float> one(static_cast<size_t>(s.out), -2.0f);
        kernels::MatRowsInt4Into(w.packed, w.params, x.data_ptr<float>() + i * s.in, 1, nullptr,
                                 one.data());
        REQUIRE(SameBits(rows.data() + i * s.out, one.data(), s.out));
      }
    }
  }
  kernels::SetKernelThreads(0);
}

TEST_CASE("int4 rows are bitwise the one-row kernel per row, AVX-512VL table", "[linear][int4]") {
  CheckRowsAgainstMatVec(Tables::kAvx512, true);
}
TEST_CASE("int4 rows are bitwise the one-row kernel per row, AVX-512VL table without VNNI",
          "[linear][int4]") {
  CheckRowsAgainstMatVec(Tables::kAvx512, false);
}
TEST_CASE("int4 rows are bitwise the one-row kernel per row, AVX2 with AVX-VNNI",
          "[linear][int4]") {
  CheckRowsAgainstMatVec(Tables::kAvx2, true);
}
TEST_CASE("int4 rows are bitwise the one-row kernel per row, AVX2", "[linear][int4]") {
  CheckRowsAgainstMatVec(Tables::kAvx2, false);
}
TEST_CASE("int4 rows are bitwise the one-row kernel per row, scalar", "[linear][int4]") {
  CheckRowsAgainstMatVec(Tables::kScalar, false);
}

// |y - ref| <= 1e-5 · (|x| · |W|ᵀ + |b|) against at::linear on the
// dequantized matrix in float64: the bound of float32 summation (and of the
// one rounding of each dequantized weight, and of each lane's scale s · d).
// x is in double, as the products quantize it.
void RequireCloseToDequantized(const torch::Tensor& y, const torch::Tensor& xd, const Int4Weight& w,
                               const torch::Tensor& bias) {
  const torch::Tensor wd = DequantizedDouble(w);
  const torch::Tensor bd = bias.defined() ? bias.to(torch::kDouble) : bias;
  const torch::Tensor ref = bd.defined() ? at::linear(xd, wd, bd) : at::linear(xd, wd);
  const torch::Tensor bound =
      bd.defined() ? at::linear(xd.abs(), wd.abs(), bd.abs()) : at::linear(xd.abs(), wd.abs());
  REQUIRE(y.sizes() == ref.sizes());
  const torch::Tensor excess = (y.to(torch::kDouble) - ref).abs() - (bound * 1e-5 + 1e-30);
  INFO("max error over bound: " << excess.max().item<double>());
  REQUIRE(excess.max().item<double>() <= 0.0);
}

TEST_CASE("Linear with int4 weights equals the dequantized product on every path",
          "[linear][int4]") {
  torch::manual_seed(23);
  for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
    KernelMode mode(tables);
    for (const Int4Shape& s : Int4Shapes()) {
      if (s.out * s.in > 200000) continue;  // the double reference is slow
      const Int4Weight w = RandomInt4(s);
      const torch::Tensor bias = torch::randn({s.out});
      for (int64_t m : {1, 2, 7, 31, 32, 45}) {
        const torch::Tensor x = torch::randn({1, m, s.in});
        const LinearPath path = SelectLinearPath(x, w.packed, bias, w.params);
        INFO(s.out << "x" << s.in << " m=" << m << " " << LinearPathName(path) << " "
                   << ActiveKernelsName());
        REQUIRE(path == LinearPath::kMatRowsInt4);
        const torch::Tensor xd = QuantizedXDouble(x);
        RequireCloseToDequantized(Linear(x, w.packed, bias, w.params), xd, w, bias);
        RequireCloseToDequantized(Linear(x, w.packed, {}, w.params), xd, w, {});
        torch::Tensor residual = torch::randn({1, m, s.out});
        const torch::Tensor before = residual.clone();
        LinearAddInto(residual, x, w.packed, {}, w.params);
        RequireCloseToDequantized(residual - before, xd, w, {});
      }
    }
  }
}

TEST_CASE("int4 weights with parameters the kernels cannot read take the baseline",
          "[linear][int4]") {
  const Int4Weight w = RandomInt4({8, 64, 32});
  const torch::Tensor x = torch::randn({64});
  CHECK(SelectLinearPath(x, w.packed, {}, {}) == LinearPath::kBaseline);
  // Float32 parameters, or groups of 16 (not a whole block): not the kernels'.
  CHECK(SelectLinearPath(x, w.packed, {}, w.params.to(torch::kFloat)) == LinearPath::kBaseline);
  const torch::Tensor sixteen = w.params.repeat_interleave(2, 1).contiguous();
  CHECK(SelectLinearPath(x, w.packed, {}, sixteen) == LinearPath::kBaseline);
  CHECK(SelectLinearPath(x, w.packed, {}, w.params) == LinearPath::kMatRowsInt4);
}

}  // namespace
}  // namespace medq::engine::int4_test
