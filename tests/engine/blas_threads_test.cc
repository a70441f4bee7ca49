// QuietBlasThreads: OpenBLAS's threads take the shorter timeout, and GEMM
// runs right after they were stopped and started again.
#include "daemon/engine/blas_threads.h"

#include <ATen/ATen.h>
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "tests/support/skip.h"

namespace medq::engine {
namespace {

TEST_CASE("QuietBlasThreads gives OpenBLAS's threads a short timeout, GEMM unchanged", "[blas]") {
  using IntFn = int (*)();
  auto* timeout = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_thread_timeout"));
  if (timeout == nullptr || dlsym(RTLD_DEFAULT, "blas_thread_shutdown_") == nullptr) {
    MEDQ_SKIP("LibTorch's GEMM here is not OpenBLAS's threaded build");
  }
  const at::Tensor a = at::randn({64, 256}), b = at::randn({256, 512});
  const at::Tensor before = at::mm(a, b);  // the threads as OpenBLAS started them
  const char* set = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  const std::string users = set != nullptr ? set : "";
  QuietBlasThreads();
  if (!users.empty()) {
    // The user's value stands.
    CHECK(std::getenv("OPENBLAS_THREAD_TIMEOUT") == users);
  } else {
    const char* now = std::getenv("OPENBLAS_THREAD_TIMEOUT");
    REQUIRE(now != nullptr);
    CHECK(std::string(now) == "22");
    CHECK(timeout() == 22);  // what OpenBLAS's restarted threads use
  }
  // The threads were stopped; the next GEMM starts them again, same result.
  const at::Tensor after = at::mm(a, b);
  CHECK(at::equal(after, before));
  const at::Tensor exact = at::mm(a.to(at::kDouble), b.to(at::kDouble));
  CHECK(at::allclose(after.to(at::kDouble), exact, 1e-4, 1e-4));
  QuietBlasThreads();  // again: nothing changes
  CHECK(at::equal(at::mm(a, b), before));
}

}  // namespace
}  // namespace medq::engine
