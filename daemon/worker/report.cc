#include "daemon/worker/report.h"

#include <spdlog/spdlog.h>

#include "daemon/engine/engine.h"

#include "daemon/worker/memory.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

std::vector<LoadedModelInfo> DescribeLoaded(const ModelStore& models) {
  std::vector<LoadedModelInfo> out;
  for (const LoadedModel& m : models.loaded())
    out.push_back(m.Describe());
  return out;
}

WorkerReport MakeReport(const ModelStore& models, bool measure) {
  WorkerReport report;
  report.loaded = DescribeLoaded(models);
  if (measure) report.memory = TakeMemorySnapshot();
  const engine::DecodeGraphCounts graphs = engine::DecodeGraphStats();
  if (graphs.failed > 0) {
    static bool logged = false;  // worker thread only
    if (!logged) {
      spdlog::warn("CUDA graphs are off, decode steps run eagerly: {}", graphs.first_failure);
      logged = true;
    }
    report.decode_graph_failure = graphs.first_failure;
  }
  return report;
}

}  // namespace medq::daemon
