// The pool for LibTorch's large CPU allocations (daemon/engine/host_pool.h):
// what is freed serves the next request of its size without new page
// faults, small allocations keep LibTorch's allocator, the free blocks stay
// within their bound, and a release gives them back.
#include "daemon/engine/host_pool.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/engine/aligned_mapping.h"
#include "tests/support/skip.h"

namespace medq::engine::test {
namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

constexpr int64_t kMiB = int64_t{1} << 20;

at::Tensor Activation(int64_t bytes) {
  return at::empty({bytes / 4}, at::kFloat);
}

// The page faults of writing every page of `t`.
long FaultsOfWriting(at::Tensor& t) {
  const long before = MinorFaults();
  t.fill_(1.0f);
  return MinorFaults() - before;
}

TEST_CASE("the host pool serves a freed activation again, without page faults", "[engine]") {
#if defined(__SANITIZE_ADDRESS__)
  MEDQ_SKIP("under AddressSanitizer the pool stays out of the way");
#endif
  UsePooledHostMemory();  // as medqd's main() does; for the rest of this process
  ReleasePooledHostMemory();
  const HostPoolStats start = PooledHostMemory();
  CHECK(start.free_bytes == 0);

  void* first_data = nullptr;
  long first_faults = 0;
  {
    at::Tensor a = Activation(24 * kMiB);
    first_data = a.data_ptr();
    CHECK(reinterpret_cast<uintptr_t>(first_data) % kHugePage == 0);
    CHECK(PooledHostMemory().mappings == start.mappings + 1);
    CHECK(PooledHostMemory().lent_bytes >= start.lent_bytes + 24 * kMiB);
    first_faults = FaultsOfWriting(a);
  }
  CHECK(PooledHostMemory().free_bytes == 24 * kMiB);
  {
    INFO("first write: " << first_faults << " faults");
    at::Tensor b = Activation(24 * kMiB);
    CHECK(b.data_ptr() == first_data);  // the same block
    CHECK(PooledHostMemory().reuses == start.reuses + 1);
    CHECK(PooledHostMemory().free_bytes == 0);
    // Its pages are there already (written once: 6,144 faults of 4 KiB
    // pages, or a dozen where the kernel gave huge pages).
    CHECK(FaultsOfWriting(b) < std::max<long>(2, first_faults / 4));
  }
  {
    INFO("a block more than a quarter larger is kept for a bigger request");
    at::Tensor small = Activation(8 * kMiB);
    CHECK(small.data_ptr() != first_data);
    CHECK(PooledHostMemory().mappings == start.mappings + 2);
    INFO("up to a quarter larger serves");
    at::Tensor near = Activation(20 * kMiB);
    CHECK(near.data_ptr() == first_data);
  }
  {
    INFO("under 1 MiB: LibTorch's own allocator");
    const HostPoolStats before = PooledHostMemory();
    at::Tensor tiny = Activation(kMiB - 4096);
    tiny.fill_(2.0f);
    CHECK(PooledHostMemory().mappings == before.mappings);
    CHECK(PooledHostMemory().lent_bytes == before.lent_bytes);
  }
  {
    INFO("raw allocations, pooled and not, go back through the raw deleter");
    c10::Allocator* cpu = c10::GetCPUAllocator();
    void* big = cpu->raw_allocate(3 * kMiB);
    void* small = cpu->raw_allocate(1000);
    CHECK(PooledHostMemory().lent_bytes >= 4 * kMiB);  // 3 MiB in 2 MiB units
    cpu->raw_deallocate(big);
    cpu->raw_deallocate(small);
  }
  const int64_t released = ReleasePooledHostMemory();
  CHECK(released >= 24 * kMiB);
  CHECK(PooledHostMemory().free_bytes == 0);
  {
    INFO("after the release a request maps anew");
    const HostPoolStats before = PooledHostMemory();
    at::Tensor c = Activation(24 * kMiB);
    CHECK(PooledHostMemory().mappings == before.mappings + 1);
    CHECK(PooledHostMemory().reuses == before.reuses);
    CHECK(FaultsOfWriting(c) > 0);
  }
  ReleasePooledHostMemory();
}

TEST_CASE("the host pool keeps at most 1 GiB free", "[engine]") {
#if defined(__SANITIZE_ADDRESS__)
  MEDQ_SKIP("under AddressSanitizer the pool stays out of the way");
#endif
  UsePooledHostMemory();
  ReleasePooledHostMemory();
  {
    // Mapped, never written: no memory is used.
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < 3; ++i)
      blocks.push_back(at::empty({400 * kMiB}, at::kByte));
  }
  const HostPoolStats s = PooledHostMemory();
  CHECK(s.free_bytes == 800 * kMiB);  // the third would have passed 1 GiB: unmapped
  CHECK(ReleasePooledHostMemory() == 800 * kMiB);
}

TEST_CASE("the host pool fails as LibTorch does when memory runs out", "[engine]") {
#if defined(__SANITIZE_ADDRESS__)
  MEDQ_SKIP("under AddressSanitizer the pool stays out of the way");
#endif
  UsePooledHostMemory();
  // In a child whose address space may grow by 32 MiB more: a 256 MiB
  // tensor cannot be mapped, and the error must be LibTorch's own, which
  // the engine reports as INSUFFICIENT_MEMORY (torch_errors.h), not some
  // message of the pool's. (Nothing else allocates while the test forks.)
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlimit limit{static_cast<rlim_t>(pages) * 4096 + (32 << 20), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(5);
    try {
      at::empty({256 * kMiB}, at::kByte);
      _exit(2);
    } catch (const c10::Error& e) {
      _exit(std::string(e.what()).find("can't allocate memory") != std::string::npos ? 0 : 3);
    } catch (...) {
      _exit(4);
    }
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("the child's exit: 2 allocated, 3 another error, 4 not a c10::Error, 5 no limit");
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace medq::engine::test
