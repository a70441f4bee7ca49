// SiluMul (the CPU decode step's gated activation) on every kernel table
// against silu(g) · up computed in double: across the range where exp is a
// normal float, at its edges and past them, and for lengths around the
// vector kernels' width.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "daemon/engine/kernels/cpu_activation.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

void CheckAgainstDouble(Tables tables) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  const std::string kernels = ActiveKernelsName();
  std::vector<float> gate = {0.0f,   -0.0f,  1e-30f, -1e-30f, 1.0f,   -1.0f, 20.0f,
                             -20.0f, 86.9f,  -86.9f, 87.0f,   -87.0f, 88.0f, -88.0f,
                             89.0f,  -89.0f, 100.0f, -100.0f, 1e30f,  -1e30f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-30.0f, 30.0f);
  std::normal_distribution<float> normal;
  while (gate.size() < 1541)
    gate.push_back(gate.size() % 2 ? wide(rng) : normal(rng));
  std::vector<float> up(gate.size());
  for (float& u : up)
    u = normal(rng);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{13}, gate.size()}) {
    std::vector<float> out(n, NAN);
    kernels::SiluMul(gate.data(), up.data(), static_cast<int64_t>(n), out.data());
    for (size_t j = 0; j < n; ++j) {
      const double g = gate[j];
      const double ref = g / (1.0 + std::exp(-g)) * up[j];
      INFO(kernels << " n " << n << " gate " << gate[j] << " up " << up[j] << " got " << out[j]
                   << " want " << ref);
      // A few float32 roundings (exp, the sum, the quotient, the product);
      // near exp's overflow the tables may give -0 for a value below 1e-35.
      REQUIRE(std::abs(out[j] - ref) <= 1e-6 * std::abs(ref) + 1e-35);
    }
  }
}

TEST_CASE("SiluMul matches silu(g) * up, AVX-512VL", "[activation]") {
  CheckAgainstDouble(Tables::kAvx512);
}
TEST_CASE("SiluMul matches silu(g) * up, AVX2", "[activation]") {
  CheckAgainstDouble(Tables::kAvx2);
}
TEST_CASE("SiluMul matches silu(g) * up, scalar", "[activation]") {
  CheckAgainstDouble(Tables::kScalar);
}

}  // namespace
}  // namespace medq::engine
