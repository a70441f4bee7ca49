#include "daemon/engine/token_mask.h"

#include <limits>

namespace medq::engine {

at::Tensor MaskLogits(const at::Tensor& logits, TokenConstraint& constraint,
                      std::vector<int32_t>& words, bool on_device) {
  const int64_t vocab = logits.size(-1);
  words.assign(static_cast<size_t>((vocab + 31) / 32), 0);
  constraint.FillAllowed(words);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (!on_device) {
    at::Tensor out = logits.to(at::kFloat).contiguous().clone();
    float* p = out.data_ptr<float>();
    for (int64_t i = 0; i < vocab; ++i) {
      const auto word = static_cast<uint32_t>(words[static_cast<size_t>(i / 32)]);
      if (((word >> (i % 32)) & 1u) == 0) p[i] = kNegInf;
    }
    return out.view(logits.sizes());
  }
  const at::Tensor packed =
      at::from_blob(words.data(), {static_cast<int64_t>(words.size()), 1}, at::kInt)
          .to(logits.device(), /*non_blocking=*/false, /*copy=*/true);
  const at::Tensor shifts =
      at::arange(32, at::TensorOptions().dtype(at::kInt).device(logits.device()));
  const at::Tensor allowed =
      at::bitwise_and(at::bitwise_right_shift(packed, shifts), 1).view({-1}).narrow(0, 0, vocab);
  return logits.masked_fill(allowed.eq(0).view(logits.sizes()), kNegInf);
}

}  // namespace medq::engine
