// A decode step captured once and replayed every token (internal).
//
// A DecodeGraph serves a fixed list of sequences (their KV caches, in row
// order) for as long as that list holds; the batch builds a new one when a
// sequence joins or leaves (it keys them by sequence id: a freed cache's
// address can come back for another sequence). Its static buffers, the step's ids and each
// row's position, live on the model's device, and StaticRows
// (static_rows.h) reads them there. Each Step() copies the ids in, runs the
// step, advances the positions on the device and the caches' counts on the
// host.
//
// On CUDA the first Step() captures the step as a CUDA graph on the worker
// thread's own stream (UseWorkerStream) and every Step() replays it: one launch a token instead of
// some twenty a layer, each waiting on the host. When a capture fails (an op
// this LibTorch cannot capture, a driver without graph support), graphs are
// off for the rest of the process, the failure is counted with its first
// message (DecodeGraphStats, engine.h) and every step runs StaticRows
// eagerly, with the same results. MEDQ_CUDA_GRAPHS=0 in the environment
// turns capture off from the start.
//
// On the CPU (the device-loop test switch, generate.h) StaticRows always
// runs eagerly: the same arithmetic and buffers, without the capture.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

class DecodeGraph {
 public:
  // Takes the caches' current lengths as the rows' positions. The model and
  // the caches must outlive the graph and keep their storage (a KvCache never
  // reallocates). Throws c10::Error when its buffers cannot be allocated.
  DecodeGraph(const Model& model, std::vector<KvCache*> caches);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // One token for every row: ids [N] int64 on the model's device (row i's
  // input). Writes each key and value at its cache's length(), advances
  // every cache by one and returns float32 logits [N, vocab] on the device,
  // a buffer of the graph's that the next Step() overwrites. Precondition:
  // every cache has room for one more position. Throws c10::Error.
  at::Tensor Step(const at::Tensor& ids);

  // Whether its steps replay a captured CUDA graph.
  bool captured() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Makes the calling thread's current stream on `device` one of its own
// rather than the default stream, once (a no-op after the first call, and on
// the CPU): graphs cannot be captured on the default stream, and the thread
// keeps the stream for all its work so that nothing crosses streams. Waits
// for the device first, and makes cuBLAS's workspaces for the stream before
// any capture can. LoadModel's warm-up calls it for a CUDA model; every
// DecodeGraph does.
void UseWorkerStream(at::Device device);

// Test switch: false keeps every DecodeGraph eager (as when a capture
// failed), so that the eager path is checked where graphs would be taken.
// Process-wide; production never calls it.
void SetDecodeGraphCaptureEnabled(bool enabled);

}  // namespace medq::engine
