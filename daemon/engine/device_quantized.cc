#include "daemon/engine/device_quantized.h"

#include <atomic>
#include <utility>
#include <vector>

#include "daemon/engine/quantize.h"
#include "daemon/engine/torch_version.h"

#if MEDQ_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace medq::engine {
namespace {

std::atomic<bool> g_form_on_cpu{false};

// LibTorch's k-tiles packed together in its layout: the most of 8, 4, 2 whose
// 16 weights each divide `in` (a multiple of 32: int4's groups are).
[[maybe_unused]] int64_t InnerKTiles(int64_t in) {
  for (int64_t t : {8, 4, 2}) {
    if (in % (16 * t) == 0) return t;
  }
  return 2;
}

// The row multiple LibTorch's layout needs on `device`.
int64_t RowMultiple(at::Device device) {
  return device.is_cpu() ? 16 : 8;
}

}  // namespace

bool TorchInt4Available() {
  return MEDQ_TORCH_AT_LEAST(2, 6);
}

TorchInt4Inputs TorchInt4From(const at::Tensor& values, const at::Tensor& params) {
  const int64_t out = values.size(0), in = 2 * values.size(1);
  const at::Tensor codes = Int4Codes(values);
  // LibTorch's: two consecutive weights a byte, the first high.
  const at::Tensor pairs = codes.view({out, in / 2, 2});
  TorchInt4Inputs r;
  r.codes = pairs.select(2, 0)
                .bitwise_left_shift(4)
                .bitwise_or(pairs.select(2, 1))
                .to(at::kByte)
                .contiguous();
  const at::Tensor p = params.to(at::kFloat);  // bf16 -> float32: exact
  const at::Tensor s = p.select(2, 0), m = p.select(2, 1);
  r.scale_zeros = at::stack({s, m + s * 8}, 2).transpose(0, 1).contiguous();
  return r;
}

TorchInt4Matrix ToTorchInt4(const TorchInt4Inputs& inputs, at::Device device) {
#if MEDQ_TORCH_AT_LEAST(2, 6)
  const int64_t in = 2 * inputs.codes.size(1);
  const int64_t t = InnerKTiles(in);
  TorchInt4Matrix m;
  if (device.is_cpu()) {
    // The CPU's converter takes one code an int32; its product takes
    // scale-and-zeros in x's dtype (float32 on the CPU).
    const at::Tensor codes = inputs.codes.to(at::kInt);
    const at::Tensor unpacked = at::stack({codes.bitwise_right_shift(4), codes.bitwise_and(15)}, 2)
                                    .view({codes.size(0), in})
                                    .contiguous();
    m.weight = at::_convert_weight_to_int4pack_for_cpu(unpacked, t);
    m.scale = inputs.scale_zeros;
    return m;
  }
  m.weight = at::_convert_weight_to_int4pack(inputs.codes.to(device), t);
  m.scale = inputs.scale_zeros.to(device, at::kBFloat16);
  return m;
#else
  (void)inputs;
  (void)device;
  TORCH_CHECK(false, "this LibTorch has no int4 matrix product (2.6 and later have)");
#endif
}

Status CheckDeviceQuantization(const ModelWeights& w, Quantization q, at::Device device,
                               bool embeddings, const std::string& model) {
  if (q == Quantization::kNone) return Status::Ok();
  const std::string where = device.is_cpu() ? "the CPU" : "a GPU";
  if (q != Quantization::kInt4) return Status::Ok();
  if (!TorchInt4Available()) {
    return Error(ErrorCode::kInvalidRequest,
                 "model " + model + ": quantize int4 on " + where +
                     " needs LibTorch 2.6 or later (its int4 matrix product); this build has " +
                     std::to_string(TORCH_VERSION_MAJOR) + "." +
                     std::to_string(TORCH_VERSION_MINOR));
  }
#if MEDQ_WITH_CUDA
  if (device.is_cuda()) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.index());
    if (p->major < 8) {
      return Error(ErrorCode::kInvalidRequest,
                   "model " + model +
                       ": quantize int4 on a GPU needs compute capability 8.0 or "
                       "newer (its tensor-core kernel); this GPU has " +
                       std::to_string(p->major) + "." + std::to_string(p->minor) +
                       ": use quantize int8, or device = cpu");
    }
  }
#endif
  const int64_t rows = RowMultiple(device);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    for (const auto& [name, matrix] : NamedProjections(w.layers[i])) {
      if (matrix->size(0) % rows != 0) {
        return Error(ErrorCode::kInvalidRequest,
                     "model " + model + ": quantize int4 on " + where + " needs every " +
                         "projection's output rows in multiples of " + std::to_string(rows) +
                         ", and layer " + std::to_string(i) + "'s " + name + " has " +
                         std::to_string(matrix->size(0)));
      }
    }
  }
  if (embeddings && w.lm_head.size(0) % rows != 0) {
    return Error(ErrorCode::kInvalidRequest,
                 "model " + model + ": quantize_embeddings with int4 on " + where +
                     " needs the vocabulary in multiples of " + std::to_string(rows) +
                     " rows, and lm_head has " + std::to_string(w.lm_head.size(0)) +
                     "; turn quantize_embeddings off");
  }
  return Status::Ok();
}

void MoveQuantizedWeights(ModelWeights& w, Quantization q, at::Device device,
                          at::ScalarType weight_dtype, at::ScalarType compute_dtype) {
  // Everything new first, so that a failed allocation leaves w untouched.
  const auto move = [device](const at::Tensor& t) {
    return t.defined() ? t.to(device) : at::Tensor();
  };
  // Floating-point tensors in `dtype`; quantized ones (int8, int4) as they are.
  const auto move_as = [device](const at::Tensor& t, at::ScalarType dtype) {
    if (!t.defined()) return at::Tensor();
    return at::isFloatingType(t.scalar_type()) ? t.to(device, dtype) : t.to(device);
  };
  ModelWeights moved;
  moved.embed = move_as(w.embed, weight_dtype);
  moved.lm_head = w.lm_head.is_same(w.embed) ? moved.embed : move_as(w.lm_head, weight_dtype);
  moved.embed_scale = move(w.embed_scale);
  moved.lm_head_scale =
      w.lm_head_scale.is_same(w.embed_scale) ? moved.embed_scale : move(w.lm_head_scale);
  if (w.lm_head.scalar_type() == at::kByte) {
    // int4 vocabulary matrices (quantize_embeddings): the input embeddings
    // stay in medq's layout, whose rows a lookup gathers (EmbedTokens);
    // lm_head takes LibTorch's, which has no rows: a tied pair becomes two
    // tensors, each 0.28 of the bf16 matrix.
    TorchInt4Matrix t = ToTorchInt4(TorchInt4From(w.lm_head, w.lm_head_scale), device);
    moved.lm_head = std::move(t.weight);
    moved.lm_head_scale = std::move(t.scale);
  }
  moved.norm = move_as(w.norm, compute_dtype);
  moved.layers.reserve(w.layers.size());
  for (const LayerWeights& l : w.layers) {
    LayerWeights d;
    for (auto [from, to] : {std::pair<const at::Tensor*, at::Tensor*>{&l.qkv_bias, &d.qkv_bias},
                            {&l.gate_up_bias, &d.gate_up_bias},
                            {&l.input_norm, &d.input_norm},
                            {&l.post_norm, &d.post_norm},
                            {&l.o_bias, &d.o_bias},
                            {&l.down_bias, &d.down_bias},
                            {&l.q_norm, &d.q_norm},
                            {&l.k_norm, &d.k_norm}}) {
      *to = move_as(*from, compute_dtype);
    }
    for (auto [matrix, scale, to, to_scale] :
         {std::tuple<const at::Tensor*, const at::Tensor*, at::Tensor*, at::Tensor*>{
              &l.qkv_proj, &l.qkv_scale, &d.qkv_proj, &d.qkv_scale},
          {&l.o_proj, &l.o_scale, &d.o_proj, &d.o_scale},
          {&l.gate_up_proj, &l.gate_up_scale, &d.gate_up_proj, &d.gate_up_scale},
          {&l.down_proj, &l.down_scale, &d.down_proj, &d.down_scale}}) {
      if (q == Quantization::kInt4) {
        TorchInt4Matrix t = ToTorchInt4(TorchInt4From(*matrix, *scale), device);
        *to = std::move(t.weight);
        *to_scale = std::move(t.scale);
      } else {
        *to = move_as(*matrix, weight_dtype);  // int8, or full precision (kNone)
        *to_scale = move(*scale);
      }
    }
    if (q != Quantization::kInt4) {
      // int8 (or full-precision) rows: the same views, into the moved stacks.
      d.q_proj = l.q_proj;
      d.k_proj = l.k_proj;
      d.v_proj = l.v_proj;
      d.gate_proj = l.gate_proj;
      d.up_proj = l.up_proj;
      PointRowViews(d);
    }
    // The split biases (q_bias .., views of the stacked ones, weights.cc)
    // are left undefined: the forward passes read the stacked ones only.
    moved.layers.push_back(std::move(d));
  }
  w = std::move(moved);
}

bool HoldsDeviceForm(Quantization q, at::Device device) {
  if (q == Quantization::kNone) return false;
  return device.is_cuda() || (q == Quantization::kInt4 && DeviceQuantizedFormOnCpu());
}

void SetDeviceQuantizedFormOnCpu(bool enabled) {
  g_form_on_cpu.store(enabled, std::memory_order_relaxed);
}

bool DeviceQuantizedFormOnCpu() {
  return g_form_on_cpu.load(std::memory_order_relaxed) && TorchInt4Available();
}

}  // namespace medq::engine
