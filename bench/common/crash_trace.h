// A benchmark that dies of a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT) writes the faulting address and a backtrace to stderr first, then
// dies of the same signal. For runs on machines without a debugger that
// works for them: `addr2line -f -C -e <binary> <+offset>` names each frame.
#pragma once

namespace medq::bench {

// Installs the handlers for this process (and the children it forks).
void PrintBacktraceOnCrash();

}  // namespace medq::bench
