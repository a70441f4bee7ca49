#include "daemon/engine/fused_ops.h"

#include <atomic>
#include <string>
#include <vector>

#include "daemon/engine/attention.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"
#include "daemon/engine/tuning.h"

#if MEDQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>

#include "daemon/engine/cuda/decode_kernels.h"
#endif

namespace medq::engine {
namespace {

std::atomic<bool> g_fused_enabled{true};
std::atomic<int> g_attention_splits{kAttentionSplitsFromEnvironment};

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
  static const bool allowed = tuning::SwitchOr(tuning::kFusedKernels, true);
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

static_assert(tuning::kMaxAttentionSplits == cuda::kMaxAttentionSplits);

// MEDQ_ATTENTION_SPLITS (tuning.h): unset 1. Read once.
int AttentionSplitsFromEnvironment() {
  static const int splits = [] {
    const char* v = tuning::Value(tuning::kAttentionSplits);
    return v == nullptr ? 1 : tuning::ParseAttentionSplits(v).value_or(1);
  }();
  return splits;
}

// The splits of DecodeAttention for `rows` rows of q (a CUDA tensor).
int AttentionSplitsFor(const at::Tensor& q, int rows, int heads) {
  int splits = g_attention_splits.load(std::memory_order_relaxed);
  if (splits == kAttentionSplitsFromEnvironment) splits = AttentionSplitsFromEnvironment();
  if (splits == kAttentionSplitsAuto) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(q.device().index());
    return cuda::DecodeAttentionSplits(rows, heads, p->multiProcessorCount);
  }
  return splits >= 1 && splits <= cuda::kMaxAttentionSplits ? splits : 1;
}
#endif

// x · wᵀ + bias on the CPU through the batch-invariant row kernels
// (kernels/cpu_linear.h: WeightRowsInto, as decode_step.cc; row i bitwise what
// it is alone, whatever the other rows), as the host loop's decode step
// computes its projections; Linear elsewhere, and for what those kernels do
// not take (LibTorch's int4 layout, a bias not in float32). Linear's CPU
// paths for several rows (BLAS GEMM, the bf16 block kernel) round otherwise
// than its one-row path, so that with Linear a sequence's logits on the
// device loop run on the CPU would depend on its neighbours.
at::Tensor RowInvariantLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                              const at::Tensor& scale) {
  bool rows = false;
  switch (SelectLinearPath(x, w, bias, scale)) {
    case LinearPath::kMatVecF32:
    case LinearPath::kMatVecBf16:
    case LinearPath::kGemmF32:
    case LinearPath::kMatMulBf16:
    case LinearPath::kTiledGemmBf16:
    case LinearPath::kMatRowsInt8:
    case LinearPath::kMatRowsInt4:
      rows = true;
      break;
    default:
      break;
  }
  if (!rows || (bias.defined() && (bias.scalar_type() != at::kFloat || !bias.is_contiguous()))) {
    return Linear(x, w, bias, scale);
  }
  const at::Tensor xc = x.contiguous();
  std::vector<int64_t> shape = xc.sizes().vec();
  shape.back() = w.size(0);
  at::Tensor y = at::empty(shape, xc.options());
  kernels::WeightRowsInto(w, scale, /*packed=*/nullptr, xc.data_ptr<float>(),
                          xc.numel() / xc.size(-1),
                          bias.defined() ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>());
  return y;
}

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

void SetAttentionSplits(int splits) {
  g_attention_splits.store(splits, std::memory_order_relaxed);
}

#if MEDQ_WITH_CUDA
namespace {

// in's row tables for one layer (static_rows.h gives their layout).
cuda::RowTables TablesOf(const Model& m, size_t layer, const StaticStepInputs& in) {
  const auto layers = m.weights.layers.size();
  const auto rows = static_cast<size_t>(in.tables.size(1));
  const auto* t = reinterpret_cast<const uint64_t*>(in.tables.data_ptr<int64_t>());
  return {t + layer * rows,
          t + (layers + layer) * rows,
          t + 2 * layers * rows,
          t + (2 * layers + 1) * rows,
          in.capacities.data_ptr<int64_t>(),
          in.positions.data_ptr<int64_t>()};
}

}  // namespace
#endif

at::Tensor RopeCacheWrite(const Model& m, const LayerWeights& l, size_t layer_index,
                          const at::Tensor& qkv, const StaticStepInputs& in,
                          std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const int64_t n = qkv.size(0), d = c.head_dim;
#if MEDQ_WITH_CUDA
  if (FusedKernelsApply(m)) {
    const at::Tensor rows = qkv.contiguous();
    at::Tensor q = at::empty({n, c.num_heads, 1, d}, rows.options());
    Check(cuda::RopeCacheWrite(
              rows.data_ptr(), TablesOf(m, layer_index, in),
              c.qk_norm ? PointerOrNull(l.q_norm) : nullptr,
              c.qk_norm ? PointerOrNull(l.k_norm) : nullptr, static_cast<float>(c.rms_norm_eps),
              q.data_ptr(), static_cast<int>(n), static_cast<int>(c.num_heads),
              static_cast<int>(c.num_kv_heads), static_cast<int>(d), ElementOf(rows), Stream(rows)),
          "RopeCacheWrite");
    return q;
  }
#endif
  std::vector<at::Tensor> qs;
  for (int64_t i = 0; i < n; ++i) {
    KvCache& cache = *caches[static_cast<size_t>(i)];
    const at::Tensor position = in.positions.narrow(0, i, 1);
    const HeadsQkv heads = RotateQkv(m, l, qkv.narrow(0, i, 1),
                                     cache.cos().index_select(0, position).view({1, 1, 1, d}),
                                     cache.sin().index_select(0, position).view({1, 1, 1, d}));
    cache.keys(layer_index).index_copy_(2, position, heads.k);
    cache.values(layer_index).index_copy_(2, position, heads.v);
    qs.push_back(heads.q);
  }
  return n == 1 ? qs[0] : at::cat(qs, 0);
}

at::Tensor DecodeAttention(const Model& m, size_t layer_index, const at::Tensor& q,
                           const StaticStepInputs& in, std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const int64_t n = q.size(0);
#if MEDQ_WITH_CUDA
  if (FusedKernelsApply(m)) {
    const at::Tensor qc = q.contiguous();
    at::Tensor out = at::empty({n, 1, c.num_heads * c.head_dim}, qc.options());
    const auto rows = static_cast<int>(n), heads = static_cast<int>(c.num_heads),
               head_dim = static_cast<int>(c.head_dim);
    const int splits = AttentionSplitsFor(qc, rows, heads);
    // Scratch of the split kernel: inside a graph's capture it comes from
    // the graph's pool and stays the graph's, as every tensor of the step.
    at::Tensor workspace;
    if (splits > 1) {
      workspace = at::empty({cuda::DecodeAttentionWorkspace(rows, heads, head_dim, splits)},
                            qc.options().dtype(at::kFloat));
    }
    Check(cuda::DecodeAttention(qc.data_ptr(), TablesOf(m, layer_index, in), out.data_ptr(), rows,
                                heads, static_cast<int>(c.num_kv_heads), head_dim,
                                c.sliding_window.value_or(0), ElementOf(qc), Stream(qc), splits,
                                splits > 1 ? workspace.data_ptr<float>() : nullptr),
          "DecodeAttention");
    return out;
  }
#endif
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    KvCache& cache = *caches[static_cast<size_t>(i)];
    out.push_back(AttendOneQuery(q.narrow(0, i, 1), cache.keys(layer_index),
                                 cache.values(layer_index),
                                 SlotMask(c, in.positions.narrow(0, i, 1), cache.capacity())));
  }
  return n == 1 ? out[0] : at::cat(out, 0);
}

#if MEDQ_WITH_CUDA
namespace {

// Whether the GEMV kernel takes x [..., halves * K] · wᵀ (+ bias, +
// residual): halves 2 for SiLU·up's [gate | up] rows.
bool GemvTakes(const Model& m, const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
               int64_t halves = 1) {
  if (!FusedKernelsApply(m) || !x.is_cuda() || !x.is_contiguous() || !w.is_contiguous()) {
    return false;
  }
  if (w.dim() != 2 || x.size(-1) != halves * w.size(1) || x.scalar_type() != w.scalar_type()) {
    return false;
  }
  if (bias.defined() && (bias.scalar_type() != x.scalar_type() || !bias.is_contiguous())) {
    return false;
  }
  return cuda::GemvApplies(x.data_ptr(), w.data_ptr(), x.numel() / (halves * w.size(1)), w.size(1),
                           ElementOf(x));
}

// x's rows: m of them, each k wide (2k for SiLU·up).
void RunGemv(const at::Tensor& x, int64_t m, const at::Tensor& w, const at::Tensor& bias,
             const at::Tensor& residual, at::Tensor& y,
             cuda::GemvInput input = cuda::GemvInput::kPlain, const at::Tensor& norm = at::Tensor(),
             double eps = 0.0) {
  Check(cuda::Gemv(x.data_ptr(), w.data_ptr(), PointerOrNull(bias), PointerOrNull(residual),
                   y.data_ptr(), m, w.size(0), w.size(1), ElementOf(x), Stream(x), input,
                   PointerOrNull(norm), static_cast<float>(eps)),
        "Gemv");
}

// Whether a norm weight [K] can go into the GEMV beside x.
bool NormFits(const at::Tensor& norm, const at::Tensor& x) {
  return norm.defined() && norm.is_cuda() && norm.is_contiguous() && norm.dim() == 1 &&
         norm.size(0) == x.size(-1) && norm.scalar_type() == x.scalar_type() &&
         reinterpret_cast<uintptr_t>(norm.data_ptr()) % 16 == 0;
}

// The output shape of x [..., K] · wᵀ.
std::vector<int64_t> OutShape(const at::Tensor& x, const at::Tensor& w) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  return shape;
}

}  // namespace
#endif

at::Tensor DecodeLinear(const Model& m, const at::Tensor& x, const at::Tensor& w,
                        const at::Tensor& bias, const at::Tensor& scale) {
#if MEDQ_WITH_CUDA
  if (GemvTakes(m, x, w, bias)) {
    at::Tensor y = at::empty(OutShape(x, w), x.options());
    RunGemv(x, x.numel() / w.size(1), w, bias, at::Tensor(), y);
    return y;
  }
#else
  (void)m;
#endif
  return RowInvariantLinear(x, w, bias, scale);
}

void DecodeLinearAddInto(const Model& m, at::Tensor& residual, const at::Tensor& x,
                         const at::Tensor& w, const at::Tensor& bias, const at::Tensor& scale) {
#if MEDQ_WITH_CUDA
  if (GemvTakes(m, x, w, bias) && residual.is_contiguous() &&
      residual.scalar_type() == x.scalar_type() &&
      residual.numel() / w.size(0) == x.numel() / w.size(1)) {
    RunGemv(x, x.numel() / w.size(1), w, bias, residual, residual);
    return;
  }
#else
  (void)m;
#endif
  if (residual.is_cuda()) return LinearAddInto(residual, x, w, bias, scale);
  // The product, then the add, for one row as for many (LinearAddInto fuses
  // them for one row only).
  residual.add_(RowInvariantLinear(x, w, bias, scale));
}

at::Tensor DecodeNormLinear(const Model& m, const at::Tensor& x, const at::Tensor& norm, double eps,
                            const at::Tensor& w, const at::Tensor& bias, const at::Tensor& scale) {
#if MEDQ_WITH_CUDA
  if (!scale.defined() && GemvTakes(m, x, w, bias) && NormFits(norm, x)) {
    at::Tensor y = at::empty(OutShape(x, w), x.options());
    RunGemv(x, x.numel() / w.size(1), w, bias, at::Tensor(), y, cuda::GemvInput::kRmsNorm, norm,
            eps);
    return y;
  }
#endif
  return DecodeLinear(m, RmsNorm(x, norm, eps), w, bias, scale);
}

void DecodeSiluLinearAddInto(const Model& m, at::Tensor& residual, const at::Tensor& gate_up,
                             const at::Tensor& w, const at::Tensor& bias, const at::Tensor& scale) {
  // gate_up's halves, not w's columns: a quantized w packs its columns.
  const int64_t inter = gate_up.size(-1) / 2;
#if MEDQ_WITH_CUDA
  // The GEMV reads gate and up of each row where x's rows would be: the
  // alignment it needs holds for both halves when it holds for [rows, 2k].
  if (!scale.defined() && w.size(1) == inter && GemvTakes(m, gate_up, w, bias, 2) &&
      residual.is_contiguous() && residual.scalar_type() == gate_up.scalar_type() &&
      residual.numel() / w.size(0) == gate_up.numel() / (2 * inter)) {
    RunGemv(gate_up, gate_up.numel() / (2 * inter), w, bias, residual, residual,
            cuda::GemvInput::kSiluMul);
    return;
  }
#endif
  DecodeLinearAddInto(m, residual, SiluMul(gate_up, inter), w, bias, scale);
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
