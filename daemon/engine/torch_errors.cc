#include "daemon/engine/torch_errors.h"

#include <c10/util/Exception.h>

#include <new>

namespace medq::engine {
namespace {

// Device memory runs out in more places than the caching allocator: cuBLAS
// allocating its workspace or handle, cuDNN its workspace, the driver on a
// raw cudaMalloc. Each says so in its own words; all are GPU_OOM.
bool LooksLikeOom(const std::string& what) {
  for (const char* sign :
       {"out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
        "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE", "cudaErrorMemoryAllocation"}) {
    if (what.find(sign) != std::string::npos) return true;
  }
  return false;
}

std::string FirstLine(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

}  // namespace

Error ErrorFromCurrentException(const std::string& context) {
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    return Error(
        ErrorCode::kGpuOom,
        context + ": GPU out of memory: " + FirstLine(e.what()) + "; retry later or free memory",
        5.0);
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (LooksLikeOom(what)) {
      return Error(
          ErrorCode::kGpuOom,
          context + ": GPU out of memory: " + FirstLine(what) + "; retry later or free memory",
          5.0);
    }
    if (what.find("can't allocate memory") != std::string::npos) {  // DefaultCPUAllocator
      return Error(ErrorCode::kInsufficientMemory,
                   context + ": out of host memory: " + FirstLine(what) +
                       "; retry later with a shorter prompt or fewer new tokens",
                   5.0);
    }
    return Error(ErrorCode::kInternal, context + ": LibTorch error: " + FirstLine(what));
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::kInsufficientMemory,
                 context + ": out of host memory; retry later with a smaller request", 5.0);
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, context + ": " + e.what());
  } catch (...) {
    return Error(ErrorCode::kInternal, context + ": unknown exception");
  }
}

}  // namespace medq::engine
