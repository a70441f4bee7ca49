// What the worker tells the loop with every completion: the loop's view of
// the worker (memory, loaded models), typed. The Scheduler applies it to the
// loop's state before the completion runs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/messages.h"

namespace medq::daemon {

class ModelStore;

struct ModelLoadReport {
  double load_ms = 0;
  bool fell_back_to_cpu = false;
};

// One forward pass of the embedding batcher.
struct EmbedBatchStats {
  int texts = 0;
  int64_t tokens = 0;      // real tokens, padding left out
  double padding = 0;      // fraction of the batch's token slots that were padding
  double forming_s = 0;    // its oldest text's arrival in the batcher -> the pass began
  double inference_s = 0;  // the forward pass
};

struct WorkerReport {
  std::optional<MemorySnapshot> memory;  // measured after the work
  std::optional<std::vector<LoadedModelInfo>> loaded;
  bool cleaned_up = false;                     // memory was released after the work
  std::optional<ModelLoadReport> model_load;   // the work loaded a model
  std::vector<EmbedBatchStats> embed_batches;  // batches run since the last report
  // Set once a decode step's CUDA graph capture has failed (decode then runs
  // eagerly for the rest of the process): the first failure's message.
  std::optional<std::string> decode_graph_failure;
};

// Worker thread: what `health` and `models` show of the loaded models.
std::vector<LoadedModelInfo> DescribeLoaded(const ModelStore& models);

// Worker thread: the loaded models, and the memory when `measure`.
WorkerReport MakeReport(const ModelStore& models, bool measure);

}  // namespace medq::daemon
