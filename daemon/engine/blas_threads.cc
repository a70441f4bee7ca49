#include "daemon/engine/blas_threads.h"

#include <dlfcn.h>

#include <cstdlib>

namespace medq::engine {
namespace {

// 2^22 cycles: long enough to stay awake between the GEMMs of one prefill
// (the attention and norms between them take well under a millisecond),
// short enough to be asleep when the next decode step starts.
constexpr const char* kTimeoutLog2 = "22";

}  // namespace

void QuietBlasThreads() {
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr) return;  // the user's choice
  // OpenBLAS reads its environment when it is loaded, before main(), and
  // starts its threads then with the timeout it read. Both entry points are
  // exported by its threaded builds: read the variable again, and stop the
  // threads, which the next GEMM starts again with the new timeout (as it
  // does after a fork).
  using Fn = void (*)();
  using ShutdownFn = int (*)();
  auto* read_env = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_read_env"));
  auto* shutdown = reinterpret_cast<ShutdownFn>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  if (read_env == nullptr || shutdown == nullptr) return;  // not OpenBLAS's threaded build
  setenv("OPENBLAS_THREAD_TIMEOUT", kTimeoutLog2, /*overwrite=*/0);
  read_env();
  shutdown();
}

}  // namespace medq::engine
