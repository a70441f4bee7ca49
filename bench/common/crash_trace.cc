#include "bench/common/crash_trace.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>

namespace medq::bench {
namespace {

// Async-signal-safe enough for a dying process: snprintf into a stack
// buffer, write(2), and backtrace(), which PrintBacktraceOnCrash has already
// called once so that it does not load libgcc (and allocate) in here.
void OnFatalSignal(int sig, siginfo_t* info, void*) {
  char line[128];
  const int n = std::snprintf(line, sizeof line, "fatal signal %d at address %p, pid %d\n", sig,
                              info->si_addr, static_cast<int>(getpid()));
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  raise(sig);  // SA_RESETHAND has put the default action back
}

}  // namespace

void PrintBacktraceOnCrash() {
  void* warm[1];
  backtrace(warm, 1);
  struct sigaction sa {};
  sa.sa_sigaction = OnFatalSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
    sigaction(sig, &sa, nullptr);
}

}  // namespace medq::bench
