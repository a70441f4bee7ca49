#include "daemon/engine/runtime.h"

#include <torch/torch.h>
#include <torch/version.h>

namespace medq::engine {

void InitWorkerThread(int num_threads) {
  if (num_threads > 0) torch::set_num_threads(num_threads);
}

std::string TorchVersion() {
  return TORCH_VERSION;
}

bool BuiltWithCuda() {
  return MEDQ_WITH_CUDA != 0;
}

}  // namespace medq::engine
