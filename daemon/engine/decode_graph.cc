#include "daemon/engine/decode_graph.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "daemon/engine/engine.h"
#include "daemon/engine/fused_ops.h"
#include "daemon/engine/static_rows.h"
#include "daemon/engine/tuning.h"

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
// A std::mutex, not a medq::Mutex (common/mutex.h): this file includes
// LibTorch, whose 1.13 headers clang cannot compile as C++20, so the
// thread-safety leg cannot analyse it; the lock is the two functions below.
std::mutex g_failure_mutex;
std::string g_first_failure;  // guarded by g_failure_mutex

bool EnvAllowsGraphs() {
  static const bool allowed = tuning::SwitchOr(tuning::kCudaGraphs, true);
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

// One bucket: its static inputs, what the host knows they hold, the caches
// its rows were last bound to, and its graph.
struct DecodeGraphs::Bucket {
  StaticStepInputs in;
  // What in's tables, capacities, advance and positions hold now (positions
  // as advanced by the steps since); empty before the first upload and
  // after a failed step, which may have left them anywhere.
  RowBinding on_device;
  std::vector<KvCache*> rows;  // the caches of the last step, padding included
  at::Tensor logits;           // the step's output: the graph's own buffer once captured
  bool tried = false;          // a capture was attempted for the current graph
#if MEDQ_WITH_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  // Whether the graph reads the caches through the tables (the fused
  // kernels) rather than holding the captured caches' tensors.
  bool reads_tables = false;
#endif

  void Body(const Model& m) {
    logits = StaticRows(m, in, rows);
    in.positions.add_(in.advance);
  }

  bool HasGraph() const {
#if MEDQ_WITH_CUDA
    return graph != nullptr;
#else
    return false;
#endif
  }

  void DropGraph() {
#if MEDQ_WITH_CUDA
    graph.reset();
    logits = at::Tensor();
#endif
    tried = false;
  }

  bool WantsCapture(const Model& m) const {
    return m.device.is_cuda() && !tried && g_capture_enabled.load() && g_failed.load() == 0 &&
           EnvAllowsGraphs();
  }

  // Records Body() into a graph; nothing runs until the first replay. On
  // failure the capture is ended, the graph dropped and graphs turned off.
  bool Capture(const Model& m) {
#if MEDQ_WITH_CUDA
    try {
      const c10::cuda::CUDAGuard guard(m.device.index());
      reads_tables = FusedKernelsApply(m);
      graph = std::make_unique<at::cuda::CUDAGraph>();
      // Thread-local: only this thread's unsafe calls could break the
      // capture; another thread asking the driver for memory figures cannot.
      graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
      try {
        Body(m);
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
      RecordFailure(std::string("capturing the decode step of ") + m.dir.string() + ": " +
                    e.what());
      return false;
    }
#else
    (void)m;
    return false;
#endif
  }

  // Runs one step over in: replays the graph, capturing it first when due,
  // or runs the step eagerly.
  void Run(const Model& m) {
    bool replay = HasGraph();
    if (!replay && WantsCapture(m)) {
      tried = true;
      replay = Capture(m);
    }
#if MEDQ_WITH_CUDA
    if (replay) {
      const c10::cuda::CUDAGuard guard(m.device.index());
      graph->replay();
      return;
    }
#endif
    Body(m);
  }

  // Whether the graph holds the caches it was captured with, which are
  // not the ones of `binding`.
  bool GraphHoldsOtherCaches(const RowBinding& binding) const {
#if MEDQ_WITH_CUDA
    return graph != nullptr && !reads_tables &&
           (binding.tables != on_device.tables || binding.capacities != on_device.capacities);
#else
    (void)binding;
    return false;
#endif
  }
};

DecodeGraphs::DecodeGraphs(const Model& model) : model_(model) {
  UseWorkerStream(model.device);
}

DecodeGraphs::~DecodeGraphs() = default;

int64_t DecodeGraphs::BucketFor(int64_t n) {
  for (const int64_t b : {1, 2, 4, 8, 16}) {
    if (n <= b) return b;
  }
  return (n + 15) / 16 * 16;
}

KvCache& DecodeGraphs::Scratch() {
  if (scratch_ == nullptr) scratch_ = std::make_unique<KvCache>(model_, 1, 1, true);
  return *scratch_;
}

at::Tensor DecodeGraphs::Step(std::span<KvCache* const> caches, const at::Tensor& ids) {
  const auto n = static_cast<int64_t>(caches.size());
  const int64_t rows = BucketFor(n);
  std::unique_ptr<Bucket>& slot = buckets_[rows];
  if (slot == nullptr) {
    auto made = std::make_unique<Bucket>();
    made->in = AllocateStepInputs(model_, rows);
    slot = std::move(made);
  }
  Bucket& b = *slot;
  std::vector<KvCache*> bound(caches.begin(), caches.end());
  while (static_cast<int64_t>(bound.size()) < rows)
    bound.push_back(&Scratch());
  RowBinding want = BindingOf(model_, bound, caches.size());
  try {
    if (b.GraphHoldsOtherCaches(want)) b.DropGraph();
    const bool rows_changed = want.tables != b.on_device.tables ||
                              want.capacities != b.on_device.capacities ||
                              want.advance != b.on_device.advance;
    if (rows_changed || want.positions != b.on_device.positions) {
      Upload(want, rows_changed, b.in);
      if (rows_changed) ++table_uploads_;
      b.on_device = std::move(want);
    }
    b.rows = std::move(bound);
    b.in.ids.narrow(0, 0, n).copy_(ids.view({-1}));
    b.Run(model_);
  } catch (...) {
    b.on_device = RowBinding();  // the positions may or may not have advanced
    throw;
  }
  for (size_t i = 0; i < caches.size(); ++i) {
    caches[i]->Advance(1);
    b.on_device.positions[i] += 1;
  }
  return b.logits.narrow(0, 0, n);
}

bool DecodeGraphs::captured(int64_t rows) const {
  const auto it = buckets_.find(rows);
  return it != buckets_.end() && it->second->HasGraph();
}

DecodeGraphs& DecodeGraphsOf(const Model& model) {
  if (model.decode_graphs == nullptr || &model.decode_graphs->model() != &model) {
    model.decode_graphs = std::make_shared<DecodeGraphs>(model);
  }
  return *model.decode_graphs;
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
