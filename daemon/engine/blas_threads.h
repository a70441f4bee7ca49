// How long the BLAS library's threads keep polling for work after a GEMM.
#pragma once

namespace medq::engine {

// Where LibTorch's GEMM is OpenBLAS's threaded build (Debian's LibTorch),
// makes OpenBLAS's threads go to sleep about a millisecond (2^22 cycles)
// after their last GEMM, rather than 2^28 cycles (~0.1 s), unless
// OPENBLAS_THREAD_TIMEOUT is set already. Without it, every float32 prefill
// left a thread polling and yielding for ~0.1 s of CPU (measured on a 2-core
// machine), on a core that the decode steps after it need. Elsewhere (MKL,
// no BLAS threads) it does nothing. Sets an environment variable: call it
// first in main(), before the program starts threads of its own.
void QuietBlasThreads();

}  // namespace medq::engine
