// The decode steps of one model, captured once and replayed every token
// (internal).
//
// A step of N rows runs in the smallest bucket of 1, 2, 4, 8 or 16 rows
// (then multiples of 16) that holds them; the rows past N are padding, bound
// to a scratch cache of one position that they rewrite and never advance.
// Each bucket keeps its static buffers (StaticStepInputs, static_rows.h) on
// the model's device: the step's ids, each row's position, and the row
// tables, which say where each row's cache is. A step whose rows hold other
// sequences than the last (one joined or left, a new request) writes the
// new tables into the same buffers, so that the same graph serves it.
//
// On CUDA a bucket's first Step() captures the step as a CUDA graph on the
// worker thread's own stream (UseWorkerStream) and every Step() replays it:
// one launch a token instead of some ten a layer, each waiting on the host.
// With the fused kernels (fused_ops.h) the graph reads every cache through
// the tables and is kept for the model's life; without them (their
// reference ops take each cache's tensors as they are captured) a step with
// other caches captures its bucket again. When a capture fails (an op this
// LibTorch cannot capture, a driver without graph support), graphs are off
// for the rest of the process, the failure is counted with its first message
// (DecodeGraphStats, engine.h) and every step runs StaticRows eagerly, with
// the same results. MEDQ_CUDA_GRAPHS=0 in the environment turns capture off
// from the start.
//
// On the CPU (the device-loop test switch, generate.h) StaticRows always
// runs eagerly: the same buckets, padding, tables and buffers, without the
// capture.
//
// Worker thread only, like everything that touches LibTorch.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

class DecodeGraphs {
 public:
  // The model must outlive the set (Model holds it: DecodeGraphsOf).
  explicit DecodeGraphs(const Model& model);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // One token for every cache: ids [N] int64 on the model's device (row i's
  // input, N = caches.size() >= 1). Writes each key and value at its
  // cache's length(), advances every cache by one and returns float32 logits
  // [N, vocab] on the device, a view of the bucket's buffer that its next
  // Step() overwrites. Preconditions: distinct one-sequence caches of this
  // model, allocated zeroed (static_rows.h), each with room for one more
  // position. Throws c10::Error; the caches' counts are unchanged then.
  at::Tensor Step(std::span<KvCache* const> caches, const at::Tensor& ids);

  // The bucket a step of n rows runs in.
  static int64_t BucketFor(int64_t n);

  // Whether the bucket of `rows` rows replays a captured CUDA graph.
  bool captured(int64_t rows) const;
  // How many times the row tables were written (a step with other caches
  // than the last one of its bucket), over all buckets: for tests.
  int64_t table_uploads() const { return table_uploads_; }
  const Model& model() const { return model_; }

 private:
  struct Bucket;
  KvCache& Scratch();

  const Model& model_;
  std::map<int64_t, std::unique_ptr<Bucket>> buckets_;  // by rows
  std::unique_ptr<KvCache> scratch_;                    // the padding rows' cache
  int64_t table_uploads_ = 0;
};

// The model's own DecodeGraphs, made at its first use. A copy of a Model
// (an adapter merged into a base) gets a set of its own at its first use.
DecodeGraphs& DecodeGraphsOf(const Model& model);

// Makes the calling thread's current stream on `device` one of its own
// rather than the default stream, once (a no-op after the first call, and on
// the CPU): graphs cannot be captured on the default stream, and the thread
// keeps the stream for all its work so that nothing crosses streams. Waits
// for the device first, and makes cuBLAS's workspaces for the stream before
// any capture can. LoadModel's warm-up calls it for a CUDA model; every
// DecodeGraphs does.
void UseWorkerStream(at::Device device);

// Test switch: false keeps every step eager (as when a capture failed), so
// that the eager path is checked where graphs would be taken. Process-wide;
// production never calls it.
void SetDecodeGraphCaptureEnabled(bool enabled);

}  // namespace medq::engine
