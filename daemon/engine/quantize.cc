#include "daemon/engine/quantize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "daemon/engine/host_memory.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/work_sharing.h"

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
  // Read as float32 (bf16 widened exactly), the arithmetic in double.
  const at::Tensor wf = w.to(at::kFloat).contiguous();
  const int64_t out = wf.size(0), in = wf.size(1);
  QuantizedRows q;
  q.values = EmptyHostWeight({out, in}, at::kChar);
  q.scales = at::empty({out}, at::kFloat);
  const float* src = wf.data_ptr<float>();
  int8_t* dst = q.values.data_ptr<int8_t>();
  float* scales = q.scales.data_ptr<float>();
  // Chunks of about 64 KiB of rows, shared with the kernels' threads.
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, in));
  const int64_t chunks = (out + rows_per_chunk - 1) / rows_per_chunk;
  kernels::ShareWork(chunks, kernels::KernelThreads() - 1, [&](int64_t chunk) {
    const int64_t end = std::min(out, (chunk + 1) * rows_per_chunk);
    for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
      const float* row = src + r * in;
      float amax = 0.0f;
      for (int64_t k = 0; k < in; ++k)
        amax = std::max(amax, std::fabs(row[k]));
      const auto scale = static_cast<float>(static_cast<double>(amax) / 127.0);
      scales[r] = scale;
      // Divide by the float32 scale actually stored, so that the bound
      // holds for what the kernels multiply by; a zero row stays 0.
      const double inverse = scale > 0.0f ? 1.0 / static_cast<double>(scale) : 0.0;
      for (int64_t k = 0; k < in; ++k) {
        // (A NaN weight, which no scale represents, becomes 0.)
        const double v = std::nearbyint(static_cast<double>(row[k]) * inverse);
        dst[r * in + k] = std::isnan(v) ? 0 : static_cast<int8_t>(std::clamp(v, -127.0, 127.0));
      }
    }
  });
  return q;
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
