#include "daemon/engine/fused_ops.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/engine/attention.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"

#if MEDQ_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "daemon/engine/cuda/decode_kernels.h"
#endif

namespace medq::engine {
namespace {

std::atomic<bool> g_fused_enabled{true};

// Key k of a cache of `capacity` slots may be seen from `position` ([1]):
// [1, capacity] bool.
at::Tensor SlotMask(const ModelConfig& c, const at::Tensor& position, int64_t capacity) {
  const at::Tensor slots = at::arange(capacity, position.options());
  at::Tensor mask = slots.le(position);
  if (c.sliding_window) mask = mask.logical_and((position - slots).lt(*c.sliding_window));
  return mask.view({1, capacity});
}

#if MEDQ_WITH_CUDA
bool FusedEnvAllows() {
  static const bool allowed = [] {
    const char* v = std::getenv("MEDQ_FUSED_KERNELS");
    return v == nullptr || std::string(v) != "0";
  }();
  return allowed;
}

bool KernelsOn() {
  return g_fused_enabled.load(std::memory_order_relaxed) && FusedEnvAllows();
}

cuda::ElementType ElementOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16:
      return cuda::ElementType::kBFloat16;
    case at::kHalf:
      return cuda::ElementType::kHalf;
    default:
      return cuda::ElementType::kFloat;
  }
}

const void* PointerOrNull(const at::Tensor& t) {
  return t.defined() ? t.data_ptr() : nullptr;
}

void Check(cudaError_t e, const char* what) {
  TORCH_CHECK(e == cudaSuccess, what, ": ", cudaGetErrorString(e));
}

cudaStream_t Stream(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}
#endif

}  // namespace

bool FusedKernelsApply(const Model& m) {
#if MEDQ_WITH_CUDA
  const at::ScalarType t = m.compute_dtype;
  return KernelsOn() && m.device.is_cuda() && m.config.head_dim % 2 == 0 &&
         m.config.head_dim <= 1024 && (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf);
#else
  (void)m;
  return false;
#endif
}

void SetFusedKernelsEnabled(bool enabled) {
  g_fused_enabled.store(enabled, std::memory_order_relaxed);
}

at::Tensor RopeCacheWrite(const Model& m, const LayerWeights& l, size_t layer_index,
                          const at::Tensor& qkv, const at::Tensor& position, const at::Tensor& cos,
                          const at::Tensor& sin, KvCache& cache) {
  const ModelConfig& c = m.config;
  at::Tensor& keys = cache.keys(layer_index);  // [1, kv_heads, capacity, D]
  at::Tensor& values = cache.values(layer_index);
#if MEDQ_WITH_CUDA
  if (FusedKernelsApply(m)) {
    const at::Tensor row = qkv.contiguous();
    at::Tensor q = at::empty({1, c.num_heads, 1, c.head_dim}, row.options());
    Check(cuda::RopeCacheWrite(
              row.data_ptr(), cos.data_ptr(), sin.data_ptr(),
              c.qk_norm ? PointerOrNull(l.q_norm) : nullptr,
              c.qk_norm ? PointerOrNull(l.k_norm) : nullptr, static_cast<float>(c.rms_norm_eps),
              position.data_ptr<int64_t>(), q.data_ptr(), keys.data_ptr(), values.data_ptr(),
              static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads),
              static_cast<int>(c.head_dim), cache.capacity(), ElementOf(row), Stream(row)),
          "RopeCacheWrite");
    return q;
  }
#endif
  const int64_t d = c.head_dim;
  const HeadsQkv heads = RotateQkv(m, l, qkv, cos.index_select(0, position).view({1, 1, 1, d}),
                                   sin.index_select(0, position).view({1, 1, 1, d}));
  keys.index_copy_(2, position, heads.k);
  values.index_copy_(2, position, heads.v);
  return heads.q;
}

at::Tensor DecodeAttention(const Model& m, size_t layer_index, const at::Tensor& q,
                           const at::Tensor& position, KvCache& cache) {
  const ModelConfig& c = m.config;
  const at::Tensor& keys = cache.keys(layer_index);
  const at::Tensor& values = cache.values(layer_index);
#if MEDQ_WITH_CUDA
  if (FusedKernelsApply(m)) {
    const at::Tensor qc = q.contiguous();
    at::Tensor out = at::empty({1, 1, c.num_heads * c.head_dim}, qc.options());
    Check(cuda::DecodeAttention(qc.data_ptr(), keys.data_ptr(), values.data_ptr(),
                                position.data_ptr<int64_t>(), out.data_ptr(),
                                static_cast<int>(c.num_heads), static_cast<int>(c.num_kv_heads),
                                static_cast<int>(c.head_dim), cache.capacity(),
                                c.sliding_window.value_or(0), ElementOf(qc), Stream(qc)),
          "DecodeAttention");
    return out;
  }
#endif
  return AttendOneQuery(q, keys, values, SlotMask(c, position, cache.capacity()));
}

#if MEDQ_WITH_CUDA
namespace {

// Whether the GEMV kernel takes x [..., K] · wᵀ (+ bias, + residual).
bool GemvTakes(const Model& m, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
  if (!FusedKernelsApply(m) || !x.is_cuda() || !x.is_contiguous() || !w.is_contiguous()) {
    return false;
  }
  if (w.dim() != 2 || x.size(-1) != w.size(1) || x.scalar_type() != w.scalar_type()) return false;
  if (bias.defined() && (bias.scalar_type() != x.scalar_type() || !bias.is_contiguous())) {
    return false;
  }
  return cuda::GemvApplies(x.data_ptr(), w.data_ptr(), x.numel() / w.size(1), w.size(1),
                           ElementOf(x));
}

void RunGemv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
             const at::Tensor& residual, at::Tensor& y) {
  Check(cuda::Gemv(x.data_ptr(), w.data_ptr(), PointerOrNull(bias), PointerOrNull(residual),
                   y.data_ptr(), x.numel() / w.size(1), w.size(0), w.size(1), ElementOf(x),
                   Stream(x)),
        "Gemv");
}

}  // namespace
#endif

at::Tensor DecodeLinear(const Model& m, const at::Tensor& x, const at::Tensor& w,
                        const at::Tensor& bias, const at::Tensor& scale) {
#if MEDQ_WITH_CUDA
  if (GemvTakes(m, x, w, bias)) {
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    at::Tensor y = at::empty(shape, x.options());
    RunGemv(x, w, bias, at::Tensor(), y);
    return y;
  }
#else
  (void)m;
#endif
  return Linear(x, w, bias, scale);
}

void DecodeLinearAddInto(const Model& m, at::Tensor& residual, const at::Tensor& x,
                         const at::Tensor& w, const at::Tensor& bias, const at::Tensor& scale) {
#if MEDQ_WITH_CUDA
  if (GemvTakes(m, x, w, bias) && residual.is_contiguous() &&
      residual.scalar_type() == x.scalar_type() &&
      residual.numel() / w.size(0) == x.numel() / w.size(1)) {
    RunGemv(x, w, bias, residual, residual);
    return;
  }
#else
  (void)m;
#endif
  LinearAddInto(residual, x, w, bias, scale);
}

at::Tensor SiluMul(const at::Tensor& gate_up, int64_t inter) {
#if MEDQ_WITH_CUDA
  if (KernelsOn() && gate_up.is_cuda() && !at::GradMode::is_enabled() &&
      (gate_up.scalar_type() == at::kFloat || gate_up.scalar_type() == at::kBFloat16 ||
       gate_up.scalar_type() == at::kHalf)) {
    const at::Tensor in = gate_up.contiguous();
    std::vector<int64_t> shape = in.sizes().vec();
    shape.back() = inter;
    at::Tensor out = at::empty(shape, in.options());
    Check(cuda::SiluMul(in.data_ptr(), out.data_ptr(), in.numel() / (2 * inter), inter,
                        ElementOf(in), Stream(in)),
          "SiluMul");
    return out;
  }
#endif
  const at::Tensor gate = at::silu(gate_up.narrow(-1, 0, inter));
  const at::Tensor up = gate_up.narrow(-1, inter, inter);
  return at::GradMode::is_enabled() ? gate * up : gate.mul_(up);
}

}  // namespace medq::engine
