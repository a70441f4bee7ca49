// The guard around the body of every libuv callback (timers, reads, writes,
// closes, the handoff's async, threadpool completions, signals, accepts).
// libuv is C: an exception that reached it would unwind through frames that
// cannot be unwound, and std::terminate would take every client down with
// the one request that failed. So a callback's body runs inside
// GuardCallback, which logs what was thrown and returns; a Responder the
// body held answers INTERNAL as it is destroyed, so the client still gets
// its one final reply. Loop thread (or libuv's threadpool for its work
// callbacks).
#pragma once

#include <exception>
#include <utility>

namespace medq::daemon {

// Logs at error level that `what` (a libuv callback) threw `message`.
void LogEscapedException(const char* what, const char* message) noexcept;

// Runs `fn()`; whatever it throws is logged with `what` and stops there.
// Anything, not only std::exception: this is the boundary with C, the one
// place where an unknown exception must still not pass.
template <typename F>
void GuardCallback(const char* what, F&& fn) noexcept {
  try {
    std::forward<F>(fn)();
  } catch (const std::exception& e) {
    LogEscapedException(what, e.what());
  } catch (...) {
    LogEscapedException(what, "an exception not derived from std::exception");
  }
}

}  // namespace medq::daemon
