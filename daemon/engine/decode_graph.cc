#include "daemon/engine/decode_graph.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "daemon/engine/engine.h"
#include "daemon/engine/static_rows.h"

#if MEDQ_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace medq::engine {
namespace {

std::atomic<bool> g_capture_enabled{true};
std::atomic<int64_t> g_captured{0};
// Captures that failed: after the first, graphs stay off for the process.
std::atomic<int64_t> g_failed{0};
std::mutex g_failure_mutex;
std::string g_first_failure;  // guarded by g_failure_mutex

bool EnvAllowsGraphs() {
  static const bool allowed = [] {
    const char* v = std::getenv("MEDQ_CUDA_GRAPHS");
    return v == nullptr || std::string(v) != "0";
  }();
  return allowed;
}

[[maybe_unused]] void RecordFailure(const std::string& what) {
  ++g_failed;
  const std::lock_guard<std::mutex> lock(g_failure_mutex);
  if (g_first_failure.empty()) g_first_failure = what;
}

}  // namespace

void UseWorkerStream(at::Device device) {
#if MEDQ_WITH_CUDA
  if (!device.is_cuda()) return;
  const auto index = static_cast<c10::DeviceIndex>(device.index());
  if (c10::cuda::getCurrentCUDAStream(index) != c10::cuda::getDefaultCUDAStream(index)) return;
  c10::cuda::device_synchronize();
  c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, index));
  // cuBLAS and cuBLASLt take a workspace for each stream at their first call
  // there; made inside a capture it would come from the graph's pool and go
  // with the graph. One small product of each kind makes it now.
  for (const at::ScalarType t : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const auto opts = at::TensorOptions().dtype(t).device(device);
    (void)at::linear(at::ones({2, 16}, opts), at::ones({16, 16}, opts), at::ones({16}, opts));
    (void)at::linear(at::ones({1, 16}, opts), at::ones({16, 16}, opts));
  }
  c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

struct DecodeGraph::Impl {
  const Model& model;
  std::vector<KvCache*> caches;
  StaticStepInputs in;
  at::Tensor logits;  // the step's output: the graph's own buffer once captured
  bool tried = false;
#if MEDQ_WITH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
#endif

  Impl(const Model& m, std::vector<KvCache*> c) : model(m), caches(std::move(c)) {}

  // The step's work, as run eagerly or recorded by a capture.
  void Body() {
    logits = StaticRows(model, in, caches);
    in.positions.add_(1);
  }

  bool WantsCapture() const {
    return model.device.is_cuda() && !tried && g_capture_enabled.load() && g_failed.load() == 0 &&
           EnvAllowsGraphs();
  }

  // Records Body() into a graph; nothing runs until the first replay. On
  // failure the capture is ended, the graph dropped and graphs turned off.
  bool Capture() {
#if MEDQ_WITH_CUDA
    try {
      const c10::cuda::CUDAGuard on_device(model.device.index());
      graph = std::make_unique<at::cuda::CUDAGraph>();
      // Thread-local: only this thread's unsafe calls could break the
      // capture; another thread asking the driver for memory figures cannot.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        Body();
      } catch (...) {
        try {
          graph->capture_end();
        } catch (...) {  // the capture was invalid; it has ended all the same
        }
        throw;
      }
      graph->capture_end();
      ++g_captured;
      return true;
    } catch (const std::exception& e) {
      (void)cudaGetLastError();  // clear the capture's error state
      graph.reset();
      logits = at::Tensor();
      RecordFailure(std::string("capturing the decode step of ") + model.dir.string() + ": " +
                    e.what());
      return false;
    }
#else
    return false;
#endif
  }
};

DecodeGraph::DecodeGraph(const Model& model, std::vector<KvCache*> caches)
    : impl_(std::make_unique<Impl>(model, std::move(caches))) {
  UseWorkerStream(model.device);
  std::vector<int64_t> positions;
  const KvCache* longest = impl_->caches.front();
  for (const KvCache* cache : impl_->caches) {
    positions.push_back(cache->length());
    if (cache->capacity() > longest->capacity()) longest = cache;
  }
  const auto on_device = at::TensorOptions().dtype(at::kLong).device(model.device);
  impl_->in.ids = at::zeros({static_cast<int64_t>(positions.size())}, on_device);
  impl_->in.positions = at::tensor(positions, at::kLong).to(model.device);
  // Every cache's table holds the same rows for the same positions; the
  // longest one covers every row.
  impl_->in.cos = longest->cos();
  impl_->in.sin = longest->sin();
}

DecodeGraph::~DecodeGraph() = default;

at::Tensor DecodeGraph::Step(const at::Tensor& ids) {
  Impl& g = *impl_;
  g.in.ids.copy_(ids.view({-1}));
  bool replay = false;
#if MEDQ_WITH_CUDA
  replay = g.graph != nullptr;
  if (!replay && g.WantsCapture()) {
    g.tried = true;
    replay = g.Capture();
  }
  if (replay) {
    const c10::cuda::CUDAGuard on_device(g.model.device.index());
    g.graph->replay();
  }
#endif
  if (!replay) g.Body();
  for (KvCache* cache : g.caches)
    cache->Advance(1);
  return g.logits;
}

bool DecodeGraph::captured() const {
#if MEDQ_WITH_CUDA
  return impl_->graph != nullptr;
#else
  return false;
#endif
}

void SetDecodeGraphCaptureEnabled(bool enabled) {
  g_capture_enabled.store(enabled);
}

DecodeGraphCounts DecodeGraphStats() {
  DecodeGraphCounts out;
  out.captured = g_captured.load();
  out.failed = g_failed.load();
  const std::lock_guard<std::mutex> lock(g_failure_mutex);
  out.first_failure = g_first_failure;
  return out;
}

}  // namespace medq::engine
