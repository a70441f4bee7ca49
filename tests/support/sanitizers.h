// What the tests must allow for when they run sanitized (the ASan+UBSan
// leg, ThreadSanitizer): a daemon several times slower, and an allocator
// that keeps freed memory (RSS says nothing of what was given back).
// Timing bounds in end-to-end tests are multiplied by kSlowdown: they stay
// bounds (a hang still fails), with room for the instrumented daemon on a
// busy CI machine.
#pragma once

namespace medq::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
inline constexpr int kSlowdown = 5;
#else
inline constexpr bool kSanitized = false;
inline constexpr int kSlowdown = 1;
#endif

}  // namespace medq::test
