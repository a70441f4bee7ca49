// Linear() against at::linear on float32-upcast weights, for every path, both
// kernel sets (AVX2+FMA and the forced scalar one), odd shapes and x layouts.
#include "daemon/engine/kernels/linear.h"

#include "daemon/engine/kernels/cpu_linear.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace medq::engine {
namespace {

// Runs the enclosing test with the SIMD kernels on or off, and restores the
// runtime choice at scope exit even when an assertion fails.
class SimdMode {
 public:
  explicit SimdMode(bool enabled) { SetSimdKernelsEnabled(enabled); }
  ~SimdMode() { SetSimdKernelsEnabled(true); }
  SimdMode(const SimdMode&) = delete;
  SimdMode& operator=(const SimdMode&) = delete;
};

torch::Tensor RandomWeight(int64_t out, int64_t in, torch::ScalarType dtype) {
  return torch::randn({out, in}).to(dtype);
}

// Asserts |y - ref| <= 1e-5 · (|x|·|W|ᵀ + |b|) elementwise: a relative bound
// on the scale of the summed terms, which is what fp32 summation order can
// change; the tiny absolute floor only covers rows whose terms are all zero.
void RequireClose(const torch::Tensor& y, const torch::Tensor& x, const torch::Tensor& weight,
                  const torch::Tensor& bias) {
  const torch::Tensor xf = x.to(torch::kFloat);
  const torch::Tensor wf = weight.to(torch::kFloat);
  const torch::Tensor bf = bias.defined() ? bias.to(torch::kFloat) : bias;
  const torch::Tensor ref = bf.defined() ? at::linear(xf, wf, bf) : at::linear(xf, wf);
  const torch::Tensor scale =
      bf.defined() ? at::linear(xf.abs(), wf.abs(), bf.abs()) : at::linear(xf.abs(), wf.abs());
  REQUIRE(y.scalar_type() == x.scalar_type());
  REQUIRE(y.sizes() == ref.sizes());
  const torch::Tensor excess = (y.to(torch::kFloat) - ref).abs() - (scale * 1e-5 + 1e-30);
  INFO("max error over bound: " << excess.max().item<float>());
  REQUIRE(excess.max().item<float>() <= 0.0f);
}

struct Shape {
  int64_t out;
  int64_t in;
};

// in not a multiple of 8/16/32, tiny and 1-row outputs, outputs large enough
// to be split across threads at odd row boundaries, and one long row (8211:
// more than the stack buffer an earlier bf16 kernel kept x in).
const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1},     {3, 7},     {1, 8},     {4, 16},    {5, 15},   {3, 17},
      {7, 31},    {1000, 33}, {9, 48},    {1, 577},   {3, 576},  {13, 1000},
      {1003, 96}, {70, 999},  {2051, 40}, {257, 130}, {5, 8211},
  };
  return shapes;
}

std::string Describe(const Shape& s, torch::ScalarType dtype, bool bias, bool simd) {
  return std::to_string(s.out) + "x" + std::to_string(s.in) + " " +
         std::string(c10::toString(dtype)) + (bias ? " bias" : " no-bias") +
         (simd ? " simd" : " scalar");
}

void CheckOneRowLayouts(torch::ScalarType dtype, bool simd) {
  SimdMode mode(simd);
  const LinearPath expected =
      dtype == torch::kBFloat16 ? LinearPath::kMatVecBf16 : LinearPath::kMatVecF32;
  for (const Shape& s : Shapes()) {
    for (bool with_bias : {false, true}) {
      INFO(Describe(s, dtype, with_bias, simd));
      const torch::Tensor w = RandomWeight(s.out, s.in, dtype);
      const torch::Tensor b = with_bias ? torch::randn({s.out}) : torch::Tensor();
      const torch::Tensor base = torch::randn({s.in});
      // A strided view: every other element of a buffer twice as long.
      const torch::Tensor strided = torch::randn({1, 2 * s.in}).slice(1, 0, 2 * s.in, 2);
      for (const torch::Tensor& x :
           {base, base.view({1, s.in}), base.view({1, 1, s.in}), strided}) {
        INFO("x sizes " << x.sizes() << " contiguous " << x.is_contiguous());
        REQUIRE(SelectLinearPath(x, w, b) == expected);
        RequireClose(Linear(x, w, b), x, w, b);
      }
    }
  }
}

void CheckManyRows(torch::ScalarType dtype, bool simd) {
  SimdMode mode(simd);
  const LinearPath expected =
      dtype == torch::kBFloat16 ? LinearPath::kMatMulBf16 : LinearPath::kGemmF32;
  for (const Shape& s : Shapes()) {
    for (bool with_bias : {false, true}) {
      INFO(Describe(s, dtype, with_bias, simd));
      const torch::Tensor w = RandomWeight(s.out, s.in, dtype);
      const torch::Tensor b = with_bias ? torch::randn({s.out}) : torch::Tensor();
      for (int64_t m = 1; m <= 17; ++m) {
        INFO("rows " << m);
        const torch::Tensor x = torch::randn({m, s.in});
        REQUIRE(
            SelectLinearPath(x, w, b) ==
            (m == 1 ? (dtype == torch::kBFloat16 ? LinearPath::kMatVecBf16 : LinearPath::kMatVecF32)
                    : expected));
        RequireClose(Linear(x, w, b), x, w, b);
      }
      // Enough rows for the tiled GEMM path of bf16 weights.
      const torch::Tensor xl = torch::randn({kTiledGemmMinRows + 3, s.in});
      REQUIRE(SelectLinearPath(xl, w, b) ==
              (dtype == torch::kBFloat16 ? LinearPath::kTiledGemmBf16 : LinearPath::kGemmF32));
      RequireClose(Linear(xl, w, b), xl, w, b);
      // Several leading dimensions, and a transposed (non-contiguous) x.
      const torch::Tensor x3 = torch::randn({2, 3, s.in});
      RequireClose(Linear(x3, w, b), x3, w, b);
      const torch::Tensor xt = torch::randn({s.in, 5}).t();
      if (s.in > 1) REQUIRE_FALSE(xt.is_contiguous());
      RequireClose(Linear(xt, w, b), xt, w, b);
    }
  }
}

TEST_CASE("the SIMD kernels are chosen when the CPU supports them", "[linear]") {
  const std::string name = ActiveKernelsName();
  REQUIRE((name == "avx512vl" || name == "avx2_fma" || name == "scalar"));
  if (name == "scalar") WARN("this CPU lacks AVX2/FMA: the SIMD tests below run scalar code");
  SetAvx512KernelsEnabled(false);
  const std::string without_avx512 = ActiveKernelsName();
  SetAvx512KernelsEnabled(true);
  CHECK(without_avx512 == (name == "scalar" ? "scalar" : "avx2_fma"));
  SimdMode off(false);
  REQUIRE(std::string(ActiveKernelsName()) == "scalar");
}

TEST_CASE("one row, float32 weights, SIMD kernels", "[linear]") {
  CheckOneRowLayouts(torch::kFloat, true);
}
TEST_CASE("one row, float32 weights, scalar kernels", "[linear]") {
  CheckOneRowLayouts(torch::kFloat, false);
}
TEST_CASE("one row, bf16 weights, SIMD kernels", "[linear]") {
  CheckOneRowLayouts(torch::kBFloat16, true);
}
TEST_CASE("one row, bf16 weights, scalar kernels", "[linear]") {
  CheckOneRowLayouts(torch::kBFloat16, false);
}
TEST_CASE("several rows, float32 weights", "[linear]") {
  CheckManyRows(torch::kFloat, true);
}
TEST_CASE("several rows, bf16 weights, SIMD kernels", "[linear]") {
  CheckManyRows(torch::kBFloat16, true);
}
TEST_CASE("several rows, bf16 weights, scalar kernels", "[linear]") {
  CheckManyRows(torch::kBFloat16, false);
}

// Both several-row bf16 paths on every row count, whatever Linear() would pick.
void CheckBf16RowPaths(bool simd) {
  SimdMode mode(simd);
  for (const Shape& s : Shapes()) {
    for (bool with_bias : {false, true}) {
      INFO(Describe(s, torch::kBFloat16, with_bias, simd));
      const torch::Tensor w = RandomWeight(s.out, s.in, torch::kBFloat16);
      const torch::Tensor b = with_bias ? torch::randn({s.out}) : torch::Tensor();
      for (int64_t m : {1, 2, 3, 5, 8, 33}) {
        INFO("rows " << m);
        const torch::Tensor x = torch::randn({m, s.in});
        RequireClose(kernels::CpuMatMulBf16(x, w, b), x, w, b);
        RequireClose(kernels::CpuTiledGemmBf16(x, w, b), x, w, b);
      }
    }
  }
}

TEST_CASE("bf16 blocked kernel and tiled GEMM on any row count, SIMD", "[linear]") {
  CheckBf16RowPaths(true);
}
TEST_CASE("bf16 blocked kernel and tiled GEMM on any row count, scalar", "[linear]") {
  CheckBf16RowPaths(false);
}

TEST_CASE("tiled GEMM crosses tile boundaries", "[linear]") {
  // More rows than one tile holds, and a last tile that is not full.
  const int64_t in = 64;
  const int64_t out = 3 * kernels::kGemmTileBytes / (in * 4) + 5;
  static_assert(kernels::kGemmTileBytes / (64 * 4) >= kernels::kGemmTileMinRows);
  const torch::Tensor w = RandomWeight(out, in, torch::kBFloat16);
  const torch::Tensor b = torch::randn({out});
  const torch::Tensor x = torch::randn({3, in});
  RequireClose(kernels::CpuTiledGemmBf16(x, w, b), x, w, b);
}

TEST_CASE("a bf16 bias is accepted with bf16 weights", "[linear]") {
  const torch::Tensor w = RandomWeight(37, 45, torch::kBFloat16);
  const torch::Tensor b = torch::randn({37}).to(torch::kBFloat16);
  const torch::Tensor x1 = torch::randn({1, 45});
  const torch::Tensor x4 = torch::randn({4, 45});
  REQUIRE(SelectLinearPath(x1, w, b) == LinearPath::kMatVecBf16);
  RequireClose(Linear(x1, w, b), x1, w, b);
  RequireClose(Linear(x4, w, b), x4, w, b);
}

TEST_CASE("the result does not depend on the number of threads", "[linear]") {
  const int threads = at::get_num_threads();
  const torch::Tensor w = RandomWeight(3001, 200, torch::kBFloat16);
  const torch::Tensor b = torch::randn({3001});
  const torch::Tensor x = torch::randn({1, 200});
  const torch::Tensor xm = torch::randn({6, 200});
  kernels::SetKernelThreads(1);
  const torch::Tensor y1 = Linear(x, w, b);
  const torch::Tensor ym1 = Linear(xm, w, b);
  kernels::SetKernelThreads(3);
  const torch::Tensor y2 = Linear(x, w, b);
  const torch::Tensor ym2 = Linear(xm, w, b);
  kernels::SetKernelThreads(0);
  at::set_num_threads(std::max(2, threads));
  kernels::SetOpenMpRowSplit(true);
  const torch::Tensor y3 = Linear(x, w, b);
  const torch::Tensor ym3 = Linear(xm, w, b);
  kernels::SetOpenMpRowSplit(false);
  at::set_num_threads(threads);
  // Each output row is computed whole by one thread with the same code.
  REQUIRE(torch::equal(y1, y2));
  REQUIRE(torch::equal(ym1, ym2));
  REQUIRE(torch::equal(y1, y3));
  REQUIRE(torch::equal(ym1, ym3));
  RequireClose(y2, x, w, b);
}

TEST_CASE("other dtypes and layouts take the baseline path", "[linear]") {
  const torch::Tensor x = torch::randn({2, 24});
  SECTION("half weights are converted to x's dtype") {
    const torch::Tensor w = RandomWeight(5, 24, torch::kHalf);
    REQUIRE(SelectLinearPath(x, w) == LinearPath::kBaseline);
    RequireClose(Linear(x, w), x, w, torch::Tensor());
  }
  SECTION("double x keeps its dtype") {
    const torch::Tensor xd = x.to(torch::kDouble);
    const torch::Tensor w = RandomWeight(5, 24, torch::kFloat);
    REQUIRE(SelectLinearPath(xd, w) == LinearPath::kBaseline);
    const torch::Tensor y = Linear(xd, w);
    REQUIRE(y.scalar_type() == torch::kDouble);
    REQUIRE(torch::allclose(y, at::linear(xd, w.to(torch::kDouble))));
  }
  SECTION("non-contiguous weights") {
    const torch::Tensor w = RandomWeight(24, 5, torch::kFloat).t();
    REQUIRE(SelectLinearPath(x, w) == LinearPath::kBaseline);
    RequireClose(Linear(x, w), x, w, torch::Tensor());
  }
  SECTION("a broadcast bias of one element") {
    const torch::Tensor w = RandomWeight(5, 24, torch::kFloat);
    const torch::Tensor b = torch::randn({1});
    REQUIRE(SelectLinearPath(x[0], w, b) == LinearPath::kBaseline);
    REQUIRE(torch::allclose(Linear(x[0], w, b), at::linear(x[0], w, b)));
  }
  SECTION("x that needs gradients keeps autograd working") {
    const torch::Tensor w = RandomWeight(5, 24, torch::kFloat);
    const torch::Tensor xg = torch::randn({1, 24}).requires_grad_(true);
    REQUIRE(SelectLinearPath(xg, w) == LinearPath::kBaseline);
    Linear(xg, w).sum().backward();
    // Sums of five float terms of order 1, in whatever order the backward's
    // matrix product takes (it varies with the threads LibTorch 2.x gets
    // under load): allclose's default atol of 1e-8 failed one run in many on
    // a column summing to near zero. float32 rounding there is ~5e-7.
    REQUIRE(torch::allclose(xg.grad(), w.sum(0, /*keepdim=*/true), 1e-5, 1e-6));
  }
  SECTION("in inference mode the fast path is taken even for tensors with grad") {
    const torch::Tensor w = RandomWeight(5, 24, torch::kFloat).requires_grad_(true);
    c10::InferenceMode guard;
    REQUIRE(SelectLinearPath(x[0], w) == LinearPath::kMatVecF32);
    RequireClose(Linear(x[0], w), x[0], w.detach(), torch::Tensor());
  }
}

TEST_CASE("shapes that do not fit fail like at::linear, without touching memory", "[linear]") {
  const torch::Tensor w = RandomWeight(5, 24, torch::kBFloat16);
  SECTION("x's last dimension differs from in") {
    const torch::Tensor x = torch::randn({1, 23});
    REQUIRE(SelectLinearPath(x, w) == LinearPath::kBaseline);
    REQUIRE_THROWS_AS(Linear(x, w), c10::Error);
  }
  SECTION("a bias of the wrong length") {
    const torch::Tensor x = torch::randn({1, 24});
    const torch::Tensor b = torch::randn({6});
    REQUIRE(SelectLinearPath(x, w, b) == LinearPath::kBaseline);
    REQUIRE_THROWS_AS(Linear(x, w, b), c10::Error);
  }
  SECTION("empty x gives an empty result") {
    const torch::Tensor x = torch::randn({0, 24});
    REQUIRE(SelectLinearPath(x, w) == LinearPath::kBaseline);
    REQUIRE(Linear(x, w).sizes() == torch::IntArrayRef({0, 5}));
  }
}

}  // namespace
}  // namespace medq::engine
