#include "daemon/worker/report.h"

#include <chrono>

#include "daemon/worker/memory.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

std::vector<LoadedModelInfo> DescribeLoaded(const ModelStore& models) {
  std::vector<LoadedModelInfo> out;
  const auto now = std::chrono::steady_clock::now();
  for (const LoadedModel& m : models.loaded()) {
    const engine::ModelInfo& info = engine::Info(*m.model);
    out.push_back(LoadedModelInfo{m.name, info.architecture, info.device, info.dtype,
                                  info.parameter_bytes, m.fell_back_to_cpu, m.tokenizer != nullptr,
                                  m.chat_template.has_value(),
                                  std::chrono::duration<double>(now - m.last_used).count()});
  }
  return out;
}

WorkerReport MakeReport(const ModelStore& models, bool measure) {
  WorkerReport report;
  report.loaded = DescribeLoaded(models);
  if (measure) report.memory = TakeMemorySnapshot();
  return report;
}

}  // namespace medq::daemon
