// The decode step's fused kernels behind LibTorch tensors (internal): each
// op runs its CUDA kernel (cuda/decode_kernels.h) where FusedKernelsApply,
// and otherwise the LibTorch ops it replaces, which are its reference: the
// CPU runs them (the device-loop leg), tests compare the two on a GPU.
// Every position and cache is read from device memory, so that a CUDA graph
// can hold any of them (static_rows.h).
#pragma once

#include <ATen/ATen.h>

#include <span>

#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"
#include "daemon/engine/static_rows.h"
#include "daemon/engine/tuning.h"

namespace medq::engine {

// Whether the kernels serve `model`: a CUDA build, the model on a CUDA
// device, head_dim even and at most 1024, and fused kernels on (the switch
// below; MEDQ_FUSED_KERNELS=0 in the environment turns them off).
bool FusedKernelsApply(const Model& model);

// Test switch: false runs the reference ops everywhere. Process-wide;
// production never calls it.
void SetFusedKernelsEnabled(bool enabled);

// How many chunks the attention kernel cuts a row's keys into
// (cuda/decode_kernels.h, flash-decoding): MEDQ_ATTENTION_SPLITS in the
// environment says, read once: unset 1 (one block walks every key, the
// kernel GPU checks have measured), "auto" enough for some two blocks an SM
// (DecodeAttentionSplits), or a number from 1 to 64. The split kernel stays
// opt-in until a GPU check has compared it with one split (scripts/gpu-check
// runs both). A graph keeps the splits it was captured with.
inline constexpr int kAttentionSplitsFromEnvironment = -1;
inline constexpr int kAttentionSplitsAuto = tuning::kAttentionSplitsAuto;
// Test switch: kAttentionSplitsFromEnvironment, kAttentionSplitsAuto or a
// number of splits, for every later call. Process-wide.
void SetAttentionSplits(int splits);

// The rows' q/k/v projection qkv [N, 1, q_out + 2 * kv_out], row i at
// in.positions[i] of caches[i] (static_rows.h): q and k heads normed (q/k
// norms) and rotated with the cache's cos/sin, k and v written into the
// cache's layer at that position (without advancing it). Returns the rotated
// q heads [N, heads, 1, D]. The kernel reads the caches through in's row
// tables, all rows in one launch; the reference, row by row: RotateQkv,
// then index_copy_ into caches[i].
at::Tensor RopeCacheWrite(const Model& model, const LayerWeights& layer, size_t layer_index,
                          const at::Tensor& qkv, const StaticStepInputs& in,
                          std::span<KvCache* const> caches);

// q [N, heads, 1, D], row i against caches[i]'s layer up to in.positions[i]
// (and within the sliding window): [N, 1, heads * D], the input of o_proj.
// The reference: AttendOneQuery a row, under a mask built on the device.
at::Tensor DecodeAttention(const Model& model, size_t layer_index, const at::Tensor& q,
                           const StaticStepInputs& in, std::span<KvCache* const> caches);

// The decode step's projections: x [..., K] (at most 16 rows) · wᵀ + bias,
// through the GEMV kernel (each weight row read once for every row, summed
// in float32) where FusedKernelsApply and the shapes fit it, else Linear
// (kernels/linear.h), its reference; on the CPU (the device loop's test
// switch) through the batch-invariant row kernels Linear's one-row path
// equals, so that each row is bitwise what it would be alone, as on the
// host loop. DecodeLinearAddInto adds the product to
// `residual` in place (LinearAddInto's contract). int8 weights (quantize.h)
// take their row scales and never go through the GEMV kernel.
at::Tensor DecodeLinear(const Model& model, const at::Tensor& x, const at::Tensor& weight,
                        const at::Tensor& bias, const at::Tensor& scale = at::Tensor());
void DecodeLinearAddInto(const Model& model, at::Tensor& residual, const at::Tensor& x,
                         const at::Tensor& weight, const at::Tensor& bias,
                         const at::Tensor& scale = at::Tensor());

// DecodeLinear(RmsNorm(x, norm, eps), ...): in the GEMV's one pass where it
// takes them (the norm is a scale of each row, applied to its sums), which
// skips rounding the normed row to the compute dtype.
at::Tensor DecodeNormLinear(const Model& model, const at::Tensor& x, const at::Tensor& norm,
                            double eps, const at::Tensor& weight, const at::Tensor& bias,
                            const at::Tensor& scale = at::Tensor());

// DecodeLinearAddInto(residual, SiluMul(gate_up, inter), ...) with inter =
// half of gate_up's last dimension: in the GEMV's one pass where it takes
// them.
void DecodeSiluLinearAddInto(const Model& model, at::Tensor& residual, const at::Tensor& gate_up,
                             const at::Tensor& weight, const at::Tensor& bias,
                             const at::Tensor& scale = at::Tensor());

// silu(gate) * up for gate_up [..., 2 * inter] (gate first): [..., inter].
// The kernel on a CUDA tensor outside grad mode (with the switch on),
// otherwise at::silu and a multiply.
at::Tensor SiluMul(const at::Tensor& gate_up, int64_t inter);

}  // namespace medq::engine
