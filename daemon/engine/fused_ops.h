// The decode step's fused kernels behind LibTorch tensors (internal): each
// op runs its CUDA kernel (cuda/decode_kernels.h) where FusedKernelsApply,
// and otherwise the LibTorch ops it replaces, which are its reference: the
// CPU runs them (the device-loop leg), tests compare the two on a GPU.
// Every position is read from device memory, so that a CUDA graph can hold
// any of them (static_rows.h).
#pragma once

#include <ATen/ATen.h>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// Whether the kernels serve `model`: a CUDA build, the model on a CUDA
// device, head_dim even and at most 1024, and fused kernels on (the switch
// below; MEDQ_FUSED_KERNELS=0 in the environment turns them off).
bool FusedKernelsApply(const Model& model);

// Test switch: false runs the reference ops everywhere. Process-wide;
// production never calls it.
void SetFusedKernelsEnabled(bool enabled);

// One sequence's q/k/v projection row qkv [1, 1, q_out + 2 * kv_out] at
// `position` ([1] int64 on the device): q and k heads normed (q/k norms)
// and rotated with cos/sin [P, D], k and v written into `cache`'s layer at
// that position (without advancing it). Returns the rotated q heads [1,
// heads, 1, D]. The reference: RotateQkv, then index_copy_.
at::Tensor RopeCacheWrite(const Model& model, const LayerWeights& layer, size_t layer_index,
                          const at::Tensor& qkv, const at::Tensor& position, const at::Tensor& cos,
                          const at::Tensor& sin, KvCache& cache);

// q [1, heads, 1, D] against `cache`'s layer up to `position` (and within
// the sliding window): [1, 1, heads * D], the input of o_proj. The
// reference: AttendOneQuery under a mask built on the device.
at::Tensor DecodeAttention(const Model& model, size_t layer_index, const at::Tensor& q,
                           const at::Tensor& position, KvCache& cache);

// The decode step's projections: x [..., K] (at most 8 rows) · wᵀ + bias,
// through the GEMV kernel (each weight row read once for every row, summed
// in float32) where FusedKernelsApply and the shapes fit it, else Linear
// (kernels/linear.h), its reference. DecodeLinearAddInto adds the product to
// `residual` in place (LinearAddInto's contract). int8 weights (quantize.h)
// take their row scales and always go through Linear.
at::Tensor DecodeLinear(const Model& model, const at::Tensor& x, const at::Tensor& weight,
                        const at::Tensor& bias, const at::Tensor& scale = at::Tensor());
void DecodeLinearAddInto(const Model& model, at::Tensor& residual, const at::Tensor& x,
                         const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& scale = at::Tensor());

// silu(gate) * up for gate_up [..., 2 * inter] (gate first): [..., inter].
// The kernel on a CUDA tensor outside grad mode (with the switch on),
// otherwise at::silu and a multiply.
at::Tensor SiluMul(const at::Tensor& gate_up, int64_t inter);

}  // namespace medq::engine
