#include "daemon/engine/kernels/linear.h"

namespace medq::engine {

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  // Baseline path: correct for every device and dtype. Weights of another
  // dtype than x are converted per call, which is slow but exact.
  const torch::Tensor w =
      weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  if (!bias.defined()) return torch::nn::functional::linear(x, w);
  const torch::Tensor b = bias.scalar_type() == x.scalar_type() ? bias : bias.to(x.scalar_type());
  return torch::nn::functional::linear(x, w, b);
}

}  // namespace medq::engine
