// The int8 weight kernels (one float32 scale per output row, dense_kernels.h
// MatVecI8Fn): x's int8 blocks (PrepareI8Rows) against an independent
// quantization, every SIMD table (with VNNI and without) bitwise equal to
// the scalar reference, the several-row kernel bitwise the one-row kernel
// per row (batch invariance), and Linear()'s int8 paths against at::linear
// on the dequantized matrix times x as rounded.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/linear.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/kernels/rounded_x.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

struct Int8Shape {
  int64_t out;
  int64_t in;
};

// in below, at and between the kernels' steps (a 32-byte half chunk, a
// 64-byte chunk, a 512-byte span) with odd tails, whole spans and last spans
// of every kind (a partial chunk, whole chunks, one byte), and outputs large
// enough to be split across threads.
const std::vector<Int8Shape>& Int8Shapes() {
  static const std::vector<Int8Shape> shapes = {
      {1, 1},   {3, 7},    {5, 8},     {4, 15},    {6, 16},  {5, 24},    {7, 31},   {2, 32},
      {3, 33},  {11, 47},  {5, 63},    {9, 72},    {2, 88},  {1000, 33}, {64, 576}, {257, 130},
      {3, 999}, {3, 1031}, {2051, 40}, {40, 4864}, {5, 512}, {4, 1024},  {3, 520},  {2, 513},
  };
  return shapes;
}

// Random int8 values over the whole range (-128 too, which QuantizeRowsInt8
// never writes but the kernels read) and positive row scales of a few orders
// of magnitude, as QuantizeRowsInt8 makes them.
struct Int8Weight {
  torch::Tensor values;  // int8 [out, in]
  torch::Tensor scales;  // float32 [out]
};
Int8Weight RandomInt8(int64_t out, int64_t in) {
  Int8Weight w;
  w.values = torch::randint(-128, 128, {out, in}).to(torch::kChar);
  w.scales = torch::rand({out}).mul_(0.05).add_(1e-4);
  return w;
}

bool SameBits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// y [m, out] from MatRowsInto with the table `tables` (m = 1: MatVecInto).
std::vector<float> RunRows(Tables tables, const Int8Weight& w, const torch::Tensor& x, int64_t m,
                           const float* bias) {
  KernelMode mode(tables);
  std::vector<float> y(static_cast<size_t>(m * w.values.size(0)), -1.0f);
  kernels::MatRowsInto(w.values, x.data_ptr<float>(), m, bias, y.data(),
                       w.scales.data_ptr<float>());
  return y;
}

TEST_CASE("PrepareI8Rows writes x's int8 blocks in the documented layout, every table",
          "[linear][int8]") {
  torch::manual_seed(14);
  for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
    KernelMode mode(tables);
    if (ActiveKernelsName() != std::string(TableName(tables))) continue;
    for (const Int8Shape& s : Int8Shapes()) {
      const int64_t m = 2, in = s.in;
      const torch::Tensor x = torch::randn({m, in}).mul_(2.0f);
      const int64_t row_bytes = kernels::I8RowBytes(in), row_lanes = kernels::I8RowLanes(in);
      std::vector<int8_t> q(static_cast<size_t>(m * row_bytes), 99);
      std::vector<float> lanes(static_cast<size_t>(m * row_lanes), 99.0f);
      std::vector<int32_t> offsets(static_cast<size_t>(m * row_lanes), 99);
      kernels::PrepareI8Rows(kernels::ActiveKernels().quantize_x_span, x.data_ptr<float>(), m, in,
                             q.data(), lanes.data(), offsets.data());
      INFO(in << " " << ActiveKernelsName());
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x.data_ptr<float>() + i * in;
        std::vector<int> expected(static_cast<size_t>(row_bytes), 0);  // zeros past in
        for (int64_t span = 0; 512 * span < in; ++span) {
          for (int64_t l = 0; l < 16; ++l) {
            const std::vector<int64_t> at = rounded_x::SpanBlock(in, span, l);
            const rounded_x::QuantizedBlock b = rounded_x::QuantizeSpanBlock(xi, in, span, l);
            int sum = 0;
            for (size_t t = 0; t < at.size(); ++t) {
              expected[static_cast<size_t>(at[t])] = b.values[t];
              sum += b.values[t];
            }
            const auto lane = static_cast<size_t>(i * row_lanes + 16 * span + l);
            REQUIRE(lanes[lane] == b.d);
            REQUIRE(offsets[lane] == -128 * sum);
          }
        }
        for (int64_t k = 0; k < row_bytes; ++k)
          REQUIRE(q[static_cast<size_t>(i * row_bytes + k)] == expected[static_cast<size_t>(k)]);
      }
    }
  }
}

TEST_CASE("a NaN or an infinity in x makes the int8 product NaN, every table", "[linear][int8]") {
  // Whole spans (in a multiple of 64: quantize_x_span's registers) and a
  // span of odd length (block by block), the bad value in a later span.
  for (int64_t in : {int64_t{1024}, int64_t{1000}}) {
    const Int8Weight w = RandomInt8(5, in);
    for (Tables tables : {Tables::kAvx512, Tables::kAvx2, Tables::kScalar}) {
      for (float bad :
           {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        INFO(TableName(tables) << " in " << in << " " << bad);
        torch::Tensor x = torch::randn({2, in});
        x[1][700] = bad;
        const std::vector<float> y = RunRows(tables, w, x, 2, nullptr);
        for (int64_t r = 0; r < 5; ++r) {
          REQUIRE(std::isfinite(y[static_cast<size_t>(r)]));
          REQUIRE(std::isnan(y[static_cast<size_t>(5 + r)]));
        }
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
  torch::manual_seed(11);
  for (const Int8Shape& s : Int8Shapes()) {
    const Int8Weight w = RandomInt8(s.out, s.in);
    const torch::Tensor bias = torch::randn({s.out});
    for (bool with_bias : {false, true}) {
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m : {1, 2, 3, 5}) {
        INFO(s.out << "x" << s.in << (with_bias ? " bias" : "") << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        const std::vector<float> simd = RunRows(tables, w, x, m, bp);
        const std::vector<float> scalar = RunRows(Tables::kScalar, w, x, m, bp);
        REQUIRE(SameBits(simd.data(), scalar.data(), m * s.out));
      }
    }
  }
}

TEST_CASE("int8 kernels equal the scalar reference bitwise, AVX-512VL table", "[linear][int8]") {
  CheckAgainstScalar(Tables::kAvx512, true);
}
TEST_CASE("int8 kernels equal the scalar reference bitwise, AVX-512VL table without VNNI",
          "[linear][int8]") {
  CheckAgainstScalar(Tables::kAvx512, false);
}
TEST_CASE("int8 kernels equal the scalar reference bitwise, AVX2 with AVX-VNNI", "[linear][int8]") {
  CheckAgainstScalar(Tables::kAvx2, true);
}
TEST_CASE("int8 kernels equal the scalar reference bitwise, AVX2", "[linear][int8]") {
  CheckAgainstScalar(Tables::kAvx2, false);
}

// Batch invariance: row i of MatRowsInto is what MatVecInto gives it alone.
void CheckRowsAgainstMatVec(Tables tables, bool vnni) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  if (tables != Tables::kScalar) MEDQ_SKIP_UNLESS_VNNI(tables, vnni);
  VnniMode choice(vnni);
  torch::manual_seed(12);
  for (const Int8Shape& s : Int8Shapes()) {
    const Int8Weight w = RandomInt8(s.out, s.in);
    const torch::Tensor bias = torch::randn({s.out});
    for (bool with_bias : {false, true}) {
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m = 1; m <= 9; ++m) {
        INFO(s.out << "x" << s.in << (with_bias ? " bias" : "") << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        std::vector<float> rows(static_cast<size_t>(m * s.out), -1.0f);
        kernels::MatRowsInto(w.values, x.data_ptr<float>(), m, bp, rows.data(),
                             w.scales.data_ptr<float>());
        for (int64_t i = 0; i < m; ++i) {
          INFO("row " << i);
          std::vector<float> one(static_cast<size_t>(s.out), -2.0f);
          kernels::MatVecInto(w.values, x.data_ptr<float>() + i * s.in, bp, one.data(),
                              w.scales.data_ptr<float>());
          REQUIRE(SameBits(rows.data() + i * s.out, one.data(), s.out));
        }
      }
    }
  }
  // A prefill chunk's rows: more x rows than fit one block of x and more
  // weight rows than one run (cpu_linear.cc, ParallelOverBlocks), on 1, 2
  // and 3 threads, so that blocks, runs and chunks all have several parts;
  // and 300 rows of 4096, whose prepared x (1.3 MiB) is more than the
  // thread's kept buffer takes.
  struct ManyRows {
    Int8Shape shape;
    int64_t m;
  };
  for (const ManyRows& c : {ManyRows{{768, 896}, 45}, ManyRows{{8, 4096}, 300}}) {
    const Int8Shape& s = c.shape;
    const int64_t m = c.m;
    const Int8Weight w = RandomInt8(s.out, s.in);
    const torch::Tensor x = torch::randn({m, s.in});
    for (int threads : {1, 2, 3}) {
      kernels::SetKernelThreads(threads);
      std::vector<float> rows(static_cast<size_t>(m * s.out), -1.0f);
      kernels::MatRowsInto(w.values, x.data_ptr<float>(), m, nullptr, rows.data(),
                           w.scales.data_ptr<float>());
      for (int64_t i = 0; i < m; ++i) {
        INFO(s.out << "x" << s.in << ", " << threads << " threads, row " << i);
        std::vector<float> one(static_cast<size_t>(s.out), -2.0f);
        kernels::MatVecInto(w.values, x.data_ptr<float>() + i * s.in, nullptr, one.data(),
                            w.scales.data_ptr<float>());
        REQUIRE(SameBits(rows.data() + i * s.out, one.data(), s.out));
      }
    }
  }
  kernels::SetKernelThreads(0);
}

TEST_CASE("int8 MatRowsInto is bitwise MatVecInto per row, AVX-512VL table", "[linear][int8]") {
  CheckRowsAgainstMatVec(Tables::kAvx512, true);
}
TEST_CASE("int8 MatRowsInto is bitwise MatVecInto per row, AVX-512VL table without VNNI",
          "[linear][int8]") {
  CheckRowsAgainstMatVec(Tables::kAvx512, false);
}
TEST_CASE("int8 MatRowsInto is bitwise MatVecInto per row, AVX2 with AVX-VNNI", "[linear][int8]") {
  CheckRowsAgainstMatVec(Tables::kAvx2, true);
}
TEST_CASE("int8 MatRowsInto is bitwise MatVecInto per row, AVX2", "[linear][int8]") {
  CheckRowsAgainstMatVec(Tables::kAvx2, false);
}
TEST_CASE("int8 MatRowsInto is bitwise MatVecInto per row, scalar", "[linear][int8]") {
  CheckRowsAgainstMatVec(Tables::kScalar, false);
}

// |y - ref| <= 1e-5 · (|x| · |W|ᵀ + |b|) against at::linear on the
// dequantized matrix in float64: the bound of float32 summation. x is in
// double, as the products round it.
void RequireCloseToDequantized(const torch::Tensor& y, const torch::Tensor& xd, const Int8Weight& w,
                               const torch::Tensor& bias) {
  const torch::Tensor wd = w.values.to(torch::kDouble) * w.scales.to(torch::kDouble).unsqueeze(1);
  const torch::Tensor bd = bias.defined() ? bias.to(torch::kDouble) : bias;
  const torch::Tensor ref = bd.defined() ? at::linear(xd, wd, bd) : at::linear(xd, wd);
  const torch::Tensor bound =
      bd.defined() ? at::linear(xd.abs(), wd.abs(), bd.abs()) : at::linear(xd.abs(), wd.abs());
  REQUIRE(y.sizes() == ref.sizes());
  const torch::Tensor excess = (y.to(torch::kDouble) - ref).abs() - (bound * 1e-5 + 1e-30);
  INFO("max error over bound: " << excess.max().item<double>());
  REQUIRE(excess.max().item<double>() <= 0.0);
}

TEST_CASE("Linear with int8 weights equals the dequantized product on every path",
          "[linear][int8]") {
  torch::manual_seed(13);
  for (Tables tables : {Tables::kAvx2, Tables::kScalar}) {
    KernelMode mode(tables);
    for (const Int8Shape& s : Int8Shapes()) {
      const Int8Weight w = RandomInt8(s.out, s.in);
      const torch::Tensor bias = torch::randn({s.out});
      for (int64_t m : {1, 2, 7, 31, 32, 45}) {
        const torch::Tensor x = torch::randn({1, m, s.in});
        const LinearPath path = SelectLinearPath(x, w.values, bias, w.scales);
        INFO(s.out << "x" << s.in << " m=" << m << " " << LinearPathName(path) << " "
                   << ActiveKernelsName());
        REQUIRE(path == LinearPath::kMatRowsInt8);
        const torch::Tensor xd = rounded_x::QuantizedXDoubleInt8(x);
        RequireCloseToDequantized(Linear(x, w.values, bias, w.scales), xd, w, bias);
        RequireCloseToDequantized(Linear(x, w.values, {}, w.scales), xd, w, {});
        // LinearAddInto: the residual plus the product.
        torch::Tensor residual = torch::randn({1, m, s.out});
        const torch::Tensor before = residual.clone();
        LinearAddInto(residual, x, w.values, {}, w.scales);
        RequireCloseToDequantized(residual - before, xd, w, {});
      }
    }
  }
}

TEST_CASE("int8 weights without scales or off the CPU take the baseline", "[linear][int8]") {
  const Int8Weight w = RandomInt8(8, 16);
  const torch::Tensor x = torch::randn({16});
  CHECK(SelectLinearPath(x, w.values, {}, {}) == LinearPath::kBaseline);
  CHECK(SelectLinearPath(x, w.values, {}, w.scales.to(torch::kDouble)) == LinearPath::kBaseline);
  // The baseline dequantizes: the same product, any path.
  RequireCloseToDequantized(Linear(x, w.values, {}, w.scales.to(torch::kDouble)),
                            x.to(torch::kDouble), w, {});
}

}  // namespace
}  // namespace medq::engine
