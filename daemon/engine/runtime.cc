#include "daemon/engine/runtime.h"

#include <torch/torch.h>
#include <torch/version.h>

namespace medq::engine {

std::string TorchVersion() {
  return TORCH_VERSION;
}

bool BuiltWithCuda() {
  return MEDQ_WITH_CUDA != 0;
}

}  // namespace medq::engine
