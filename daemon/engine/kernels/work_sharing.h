// Work sharing for the kernels' row loops that never waits for a thread that
// has not started: the caller and helper threads claim chunks from a shared
// counter, and the caller waits only for chunks a helper has claimed. On a
// busy machine, where a helper may not be scheduled for milliseconds, the
// caller simply does all chunks itself; an OpenMP parallel region (what
// at::parallel_for uses) would wait at its barrier for every thread instead.
#pragma once

#include <cstdint>
#include <functional>

namespace medq::engine::kernels {

// Runs fn(chunk) once for every chunk in [0, chunks), on the calling thread
// and on up to `helpers` helper threads, and returns when all have run.
// Chunks may run in any order and concurrently; fn must not throw.
// helpers <= 0 or chunks <= 1 runs everything on the calling thread.
// Helper threads are started on first use (up to the largest `helpers` ever
// asked for), live until the process exits, and spin briefly after each job
// before they sleep. Thread-safety: callers are serialized (one job at a
// time, which is the engine's one worker thread anyway); fn must not call
// ShareWork itself (it would wait for its own lock).
void ShareWork(int64_t chunks, int helpers, const std::function<void(int64_t)>& fn);

}  // namespace medq::engine::kernels
