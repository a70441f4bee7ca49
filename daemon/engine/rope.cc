#include "daemon/engine/rope.h"

#include <cmath>

namespace medq::engine {

at::Tensor RopeInvFreq(const ModelConfig& c) {
  // Same float32 steps as transformers' _compute_default_rope_parameters.
  const at::Tensor exponent =
      at::arange(0, c.head_dim, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) /
      static_cast<double>(c.head_dim);
  at::Tensor inv_freq = 1.0 / at::pow(c.rope_theta, exponent);
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type == RopeScalingType::kLinear) return inv_freq / rs.factor;
  if (rs.type != RopeScalingType::kLlama3) return inv_freq;
  // transformers' _compute_llama3_parameters.
  const double old_len = static_cast<double>(rs.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / rs.low_freq_factor;
  const double high_freq_wavelen = old_len / rs.high_freq_factor;
  const at::Tensor wavelen = 2 * M_PI / inv_freq;
  const at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / rs.factor, inv_freq);
  const at::Tensor smooth =
      (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / rs.factor + smooth * scaled;
  const at::Tensor is_medium =
      (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(is_medium, smoothed, scaled);
}

void RopeTables(const at::Tensor& inv_freq, int64_t positions, at::Device device,
                at::ScalarType dtype, at::Tensor* cos, at::Tensor* sin) {
  const at::Tensor pos = at::arange(positions, at::TensorOptions().dtype(at::kLong)).to(at::kFloat);
  const at::Tensor freqs = at::outer(pos, inv_freq.to(at::kFloat));
  const at::Tensor emb = at::cat({freqs, freqs}, -1);
  *cos = emb.cos().to(device, dtype);
  *sin = emb.sin().to(device, dtype);
}

at::Tensor ApplyRope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return (x * cos).add_(rotated.mul_(sin));
}

}  // namespace medq::engine
