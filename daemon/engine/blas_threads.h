// How long the BLAS library's threads keep polling for work after a GEMM.
#pragma once

namespace medq::engine {

// Where LibTorch's GEMM is OpenBLAS's threaded build (Debian's LibTorch),
// makes OpenBLAS's threads go to sleep about a millisecond (2^22 cycles)
// after their last GEMM, rather than 2^28 cycles (~0.1 s), unless
// OPENBLAS_THREAD_TIMEOUT is set already. Without it, every float32 prefill
// left a thread polling and yielding for ~0.1 s of CPU on a core the decode
// steps that follow need (on a 2-core machine: Qwen2.5-0.5B fp32 decoded 2
// to 5 ms a token slower in the daemon than alone). Elsewhere (MKL, no BLAS
// threads) it does nothing. Sets an environment variable: call it first in
// main(), before the program starts threads of its own.
void QuietBlasThreads();

}  // namespace medq::engine
