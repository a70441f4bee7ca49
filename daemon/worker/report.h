// What the worker tells the loop with every completion: the loop's view of
// the worker (memory, loaded models), typed. The Scheduler applies it to the
// loop's state before the completion runs.
#pragma once

#include <optional>
#include <vector>

#include "common/messages.h"

namespace medq::daemon {

class ModelStore;

struct ModelLoadReport {
  double load_ms = 0;
  bool fell_back_to_cpu = false;
};

struct WorkerReport {
  std::optional<MemorySnapshot> memory;  // measured after the work
  std::optional<std::vector<LoadedModelInfo>> loaded;
  bool cleaned_up = false;                    // memory was released after the work
  std::optional<ModelLoadReport> model_load;  // the work loaded a model
};

// Worker thread: what `health` and `models` show of the loaded models.
std::vector<LoadedModelInfo> DescribeLoaded(const ModelStore& models);

// Worker thread: the loaded models, and the memory when `measure`.
WorkerReport MakeReport(const ModelStore& models, bool measure);

}  // namespace medq::daemon
