#include "daemon/engine/quantize.h"

#include <cstring>
#include <vector>

#include "daemon/engine/host_memory.h"

namespace medq::engine {

Result<Quantization> ParseQuantization(const std::string& name) {
  if (name == "none") return Quantization::kNone;
  if (name == "int8") return Quantization::kInt8;
  if (name == "int4") {
    return Error(ErrorCode::kInvalidRequest,
                 "quantize int4 is not supported yet; use int8 or none");
  }
  return Error(ErrorCode::kInvalidRequest, "quantize '" + name + "' is not one of none, int8");
}

const char* QuantizationName(Quantization q) {
  return q == Quantization::kInt8 ? "int8" : "none";
}

QuantizedRows QuantizeRowsInt8(const at::Tensor& w) {
  const at::Tensor wd = w.to(at::kDouble).contiguous();
  const at::Tensor scale_d = wd.abs().amax(1).div_(127.0);
  const at::Tensor scales = scale_d.to(at::kFloat).contiguous();
  // Divide by the float32 scale actually stored, so that the bound holds for
  // what the kernels multiply by; a zero row divides by 1 (and stays 0).
  const at::Tensor stored = scales.to(at::kDouble);
  const at::Tensor divisor = at::where(stored > 0, stored, at::ones_like(stored));
  const at::Tensor q = wd.div(divisor.unsqueeze(1)).round_().clamp_(-127, 127).to(at::kChar);
  QuantizedRows out;
  out.values = EmptyHostWeight(q.sizes(), at::kChar);
  std::memcpy(out.values.data_ptr<int8_t>(), q.data_ptr<int8_t>(), static_cast<size_t>(q.numel()));
  out.scales = scales;
  return out;
}

at::Tensor DequantizeRowsInt8(const at::Tensor& values, const at::Tensor& scales) {
  return values.to(at::kFloat).mul_(scales.to(at::kFloat).unsqueeze(1));
}

namespace {

// Points each of `parts` (all defined, or none) at its row range of `stacked`.
void PointAt(std::initializer_list<at::Tensor*> parts, const at::Tensor& stacked) {
  int64_t row = 0;
  for (at::Tensor* p : parts) {
    if (!p->defined()) return;
    const int64_t rows = p->size(0);
    *p = stacked.narrow(0, row, rows);
    row += rows;
  }
}

}  // namespace

void QuantizeProjections(ModelWeights& w) {
  // Everything new first, so that a failed allocation leaves w untouched.
  std::vector<LayerWeights> layers = w.layers;
  for (LayerWeights& l : layers) {
    const auto quantize = [](at::Tensor& matrix, at::Tensor& scale) {
      QuantizedRows q = QuantizeRowsInt8(matrix);
      matrix = std::move(q.values);
      scale = std::move(q.scales);
    };
    quantize(l.qkv_proj, l.qkv_scale);
    quantize(l.o_proj, l.o_scale);
    quantize(l.gate_up_proj, l.gate_up_scale);
    quantize(l.down_proj, l.down_scale);
    PointAt({&l.q_proj, &l.k_proj, &l.v_proj}, l.qkv_proj);
    PointAt({&l.gate_proj, &l.up_proj}, l.gate_up_proj);
    // The bf16 tiles were copies of the full-precision matrices.
    l.qkv_packed = at::Tensor();
    l.o_packed = at::Tensor();
    l.gate_up_packed = at::Tensor();
    l.down_packed = at::Tensor();
  }
  w.layers = std::move(layers);
}

}  // namespace medq::engine
