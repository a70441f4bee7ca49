#include "daemon/worker/report.h"

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
  return report;
}

}  // namespace medq::daemon
