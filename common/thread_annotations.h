// Clang's thread-safety annotations (-Wthread-safety), as leveldb's and
// Abseil's: the compiler checks that a member marked GUARDED_BY(mu) is only
// touched with mu held, and that a function marked REQUIRES(mu) is only
// called with it held. Under other compilers every macro is empty.
//
// std::mutex is not annotated in libstdc++, so annotated code locks a
// medq::Mutex (common/mutex.h). Reference:
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#pragma once

#if defined(__clang__)
#define MEDQ_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define MEDQ_THREAD_ANNOTATION(x)
#endif

// A class that is a lock (a "capability"): medq::Mutex.
#ifndef CAPABILITY
#define CAPABILITY(name) MEDQ_THREAD_ANNOTATION(capability(name))
#endif
// An RAII class that holds a capability for its lifetime: MutexLock.
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY MEDQ_THREAD_ANNOTATION(scoped_lockable)
#endif

// A data member read or written only with the given lock held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) MEDQ_THREAD_ANNOTATION(guarded_by(x))
#endif
// A pointer member whose pointee is read or written only with the lock held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) MEDQ_THREAD_ANNOTATION(pt_guarded_by(x))
#endif

// A function that must be called with the given locks held.
#ifndef REQUIRES
#define REQUIRES(...) MEDQ_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
// A function that must be called without the given locks held (it takes them).
#ifndef EXCLUDES
#define EXCLUDES(...) MEDQ_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
// A function that takes the given locks (none: `this`) and returns holding them.
#ifndef ACQUIRE
#define ACQUIRE(...) MEDQ_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
// A function that releases the given locks (none: `this`).
#ifndef RELEASE
#define RELEASE(...) MEDQ_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
// A function that checks, at run time, that the lock is held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) MEDQ_THREAD_ANNOTATION(assert_capability(x))
#endif

// Turns the analysis off for one function: for code whose locking it cannot
// follow. Say why beside each use.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS MEDQ_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
