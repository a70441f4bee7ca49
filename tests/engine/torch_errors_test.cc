// Exceptions from LibTorch become the protocol's error codes.
#include <catch2/catch.hpp>

#include <c10/util/Exception.h>

#include "daemon/engine/torch_errors.h"

namespace medq::engine {
namespace {

template <typename Fn>
Error Mapped(Fn throw_it) {
  try {
    throw_it();
  } catch (...) {
    return ErrorFromCurrentException("generating with model /models/x");
  }
  FAIL("nothing was thrown");
  return Error();
}

TEST_CASE("LibTorch exceptions map to error codes", "[engine][errors]") {
  Error e = Mapped([] {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB");
  });
  CHECK(e.code == ErrorCode::kGpuOom);
  CHECK(e.retry_after_s.has_value());
  e = Mapped([] { TORCH_CHECK(false, "CUDA out of memory. Tried to allocate 2.00 GiB"); });
  CHECK(e.code == ErrorCode::kGpuOom);
  // cuBLAS, cuDNN and the runtime report device OOM in their own words.
  for (const char* what :
       {"CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cuDNN error: CUDNN_STATUS_ALLOC_FAILED", "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
        "CUDA error: out of memory", "cudaErrorMemoryAllocation"}) {
    CAPTURE(what);
    CHECK(Mapped([what] { TORCH_CHECK(false, what); }).code == ErrorCode::kGpuOom);
  }
  e = Mapped([] {
    TORCH_CHECK(false, "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes");
  });
  CHECK(e.code == ErrorCode::kInsufficientMemory);
  e = Mapped([] { TORCH_CHECK(false, "shape mismatch"); });
  CHECK(e.code == ErrorCode::kInternal);
  CHECK_THAT(e.message, Catch::Contains("/models/x") && Catch::Contains("shape mismatch"));
  e = Mapped([] { throw std::bad_alloc(); });
  CHECK(e.code == ErrorCode::kInsufficientMemory);
}

}  // namespace
}  // namespace medq::engine
