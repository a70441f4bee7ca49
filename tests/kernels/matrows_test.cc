// MatRowsInto (the batched decode step's projections) against MatVecInto one
// row at a time: bitwise equal for every row count, shape, bias and kernel
// set, which is what makes a batched decode step batch-invariant.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/linear.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

struct MatRowsShape {
  int64_t out;
  int64_t in;
};

// in below, at and between the kernels' steps (8, 16, 32) with odd tails, and
// outputs large enough to be split across threads.
const std::vector<MatRowsShape>& MatRowsShapes() {
  static const std::vector<MatRowsShape> shapes = {
      {1, 1},     {3, 7},    {5, 8},     {4, 15},  {7, 16},    {6, 17},
      {9, 31},    {2, 32},   {3, 33},    {11, 47}, {8, 48},    {5, 63},
      {1000, 33}, {64, 576}, {257, 130}, {3, 999}, {2051, 40}, {40, 4864},
  };
  return shapes;
}

bool BitwiseEqual(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// Skipped (not passed) on a CPU without the table: another table would run.
void CheckAgainstMatVec(torch::ScalarType dtype, Tables tables) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  const std::string kernels = ActiveKernelsName();
  torch::manual_seed(7);
  for (const MatRowsShape& s : MatRowsShapes()) {
    const torch::Tensor w = torch::randn({s.out, s.in}).to(dtype);
    for (bool with_bias : {false, true}) {
      const torch::Tensor bias = torch::randn({s.out});
      const float* bp = with_bias ? bias.data_ptr<float>() : nullptr;
      for (int64_t m = 1; m <= 9; ++m) {
        INFO(s.out << "x" << s.in << " " << c10::toString(dtype) << (with_bias ? " bias" : "")
                   << " " << kernels << " m=" << m);
        const torch::Tensor x = torch::randn({m, s.in});
        std::vector<float> rows(static_cast<size_t>(m * s.out), -1.0f);
        kernels::MatRowsInto(w, x.data_ptr<float>(), m, bp, rows.data());
        for (int64_t i = 0; i < m; ++i) {
          INFO("row " << i);
          std::vector<float> one(static_cast<size_t>(s.out), -2.0f);
          kernels::MatVecInto(w, x.data_ptr<float>() + i * s.in, bp, one.data());
          REQUIRE(BitwiseEqual(rows.data() + i * s.out, one.data(), s.out));
        }
      }
    }
  }
}

TEST_CASE("MatRowsInto is bitwise MatVecInto per row, float32, AVX-512VL", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kFloat, Tables::kAvx512);
}
TEST_CASE("MatRowsInto is bitwise MatVecInto per row, float32, AVX2", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kFloat, Tables::kAvx2);
}
TEST_CASE("MatRowsInto is bitwise MatVecInto per row, float32, scalar", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kFloat, Tables::kScalar);
}
TEST_CASE("MatRowsInto is bitwise MatVecInto per row, bf16, AVX-512VL", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kBFloat16, Tables::kAvx512);
}
TEST_CASE("MatRowsInto is bitwise MatVecInto per row, bf16, AVX2", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kBFloat16, Tables::kAvx2);
}
TEST_CASE("MatRowsInto is bitwise MatVecInto per row, bf16, scalar", "[linear][matrows]") {
  CheckAgainstMatVec(torch::kBFloat16, Tables::kScalar);
}

TEST_CASE("MatRowsInto matches at::linear and ignores thread count", "[linear][matrows]") {
  torch::manual_seed(3);
  for (const torch::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
    const torch::Tensor w = torch::randn({1003, 96}).to(dtype);
    const torch::Tensor bias = torch::randn({1003});
    const torch::Tensor x = torch::randn({5, 96});
    torch::Tensor y = torch::empty({5, 1003});
    kernels::MatRowsInto(w, x.data_ptr<float>(), 5, bias.data_ptr<float>(), y.data_ptr<float>());
    const torch::Tensor ref = at::linear(x, w.to(torch::kFloat), bias);
    CHECK((y - ref).abs().max().item<float>() <= 1e-4f);
    kernels::SetKernelThreads(1);
    torch::Tensor y1 = torch::empty({5, 1003});
    kernels::MatRowsInto(w, x.data_ptr<float>(), 5, bias.data_ptr<float>(), y1.data_ptr<float>());
    kernels::SetKernelThreads(0);
    CHECK(torch::equal(y, y1));
  }
}

}  // namespace
}  // namespace medq::engine
