#include "bench/common/crash_trace.h"

#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <initializer_list>

namespace medq::bench {
namespace {

// Async-signal-safe enough for a dying process: snprintf into a stack
// buffer, write(2), and backtrace(), which PrintBacktraceOnCrash has already
// called once so that it does not load libgcc (and allocate) in here.
// backtrace() starts from the handler and loses the faulting frame when the
// program counter itself is bad (a call through a null pointer: it drops a
// trailing null frame), so the program counter and the word at the stack
// pointer (the return address, right after such a call) are named first.
void OnFatalSignal(int sig, siginfo_t* info, void* context) {
  char line[128];
  const int n = std::snprintf(line, sizeof line, "fatal signal %d at address %p, pid %d\n", sig,
                              info->si_addr, static_cast<int>(getpid()));
  if (n > 0) (void)!write(STDERR_FILENO, line, static_cast<size_t>(n));
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  void* at_fault[2] = {reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]),
                       *reinterpret_cast<void* const*>(uc->uc_mcontext.gregs[REG_RSP])};
  static constexpr char kHeading[] = "program counter, then the word at the stack pointer:\n";
  (void)!write(STDERR_FILENO, kHeading, sizeof kHeading - 1);
  backtrace_symbols_fd(at_fault, 2, STDERR_FILENO);
#else
  (void)context;
#endif
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
