#include "daemon/engine/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/engine/host_memory.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/work_sharing.h"

namespace medq::engine {

Result<Quantization> ParseQuantization(const std::string& name) {
  if (name == "none") return Quantization::kNone;
  if (name == "int8") return Quantization::kInt8;
  if (name == "int4") return Quantization::kInt4;
  return Error(ErrorCode::kInvalidRequest,
               "quantize '" + name + "' is not one of none, int8, int4");
}

const char* QuantizationName(Quantization q) {
  switch (q) {
    case Quantization::kInt8:
      return "int8";
    case Quantization::kInt4:
      return "int4";
    case Quantization::kNone:
      break;
  }
  return "none";
}

bool IsInt4Group(int64_t group) {
  return group == 32 || group == 64 || group == 128;
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

// v as bf16 bits, rounded up (toward +inf) or down, never to nearest: the
// int4 range [m, m + 15 s] must hold the group's weights.
uint16_t Bf16Toward(double v, bool up) {
  float f = static_cast<float>(v);
  if (up && static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
  if (!up && static_cast<double>(f) > v) f = std::nextafter(f, -INFINITY);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  auto high = static_cast<uint16_t>(bits >> 16);
  // Dropping the low half rounds toward zero: away from it where that is
  // the direction asked for (up for a positive value, down for a negative).
  const bool negative = (bits >> 31) != 0;
  if ((bits & 0xFFFFu) != 0 && up != negative) ++high;
  return high;
}

double Bf16Value(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &widened, sizeof(f));
  return f;
}

}  // namespace

QuantizedGroups QuantizeRowsInt4(const at::Tensor& w, int64_t group) {
  const at::Tensor wf = w.to(at::kFloat).contiguous();
  const int64_t out = wf.size(0), in = wf.size(1);
  if (!IsInt4Group(group) || in % group != 0) {
    throw std::invalid_argument("QuantizeRowsInt4: groups of " + std::to_string(group) +
                                " do not fit rows of " + std::to_string(in));
  }
  const int64_t groups = in / group;
  QuantizedGroups q;
  q.values = EmptyHostWeight({out, in / 2}, at::kByte);
  q.params = at::empty({out, groups, 2}, at::kBFloat16);
  const float* src = wf.data_ptr<float>();
  uint8_t* dst = q.values.data_ptr<uint8_t>();
  auto* params = reinterpret_cast<uint16_t*>(q.params.data_ptr<at::BFloat16>());
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, in));
  const int64_t chunks = (out + rows_per_chunk - 1) / rows_per_chunk;
  kernels::ShareWork(chunks, kernels::KernelThreads() - 1, [&](int64_t chunk) {
    std::vector<uint8_t> codes(static_cast<size_t>(in));
    const int64_t end = std::min(out, (chunk + 1) * rows_per_chunk);
    for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
      const float* row = src + r * in;
      for (int64_t g = 0; g < groups; ++g) {
        const float* v = row + g * group;
        // (NaN weights, which no code represents, are left out and become 0.)
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t k = 0; k < group; ++k) {
          lo = std::fmin(lo, v[k]);
          hi = std::fmax(hi, v[k]);
        }
        if (lo > hi) lo = hi = 0.0f;  // every weight NaN
        const uint16_t m_bits = Bf16Toward(lo, false);
        const double m = Bf16Value(m_bits);
        const uint16_t s_bits = Bf16Toward((static_cast<double>(hi) - m) / 15.0, true);
        const double s = Bf16Value(s_bits);
        params[(r * groups + g) * 2] = s_bits;
        params[(r * groups + g) * 2 + 1] = m_bits;
        // From the stored s and m, so that the bound holds for what the
        // kernels compute with; a group of one value (s = 0) codes 0.
        const double inverse = s > 0.0 ? 1.0 / s : 0.0;
        for (int64_t k = 0; k < group; ++k) {
          const double c = std::nearbyint((static_cast<double>(v[k]) - m) * inverse);
          codes[static_cast<size_t>(g * group + k)] =
              std::isnan(c) ? 0 : static_cast<uint8_t>(std::clamp(c, 0.0, 15.0));
        }
      }
      // Blocks of 32: byte j holds code j low and code j + 16 high.
      uint8_t* packed = dst + r * (in / 2);
      for (int64_t b = 0; b < in / 32; ++b) {
        for (int64_t j = 0; j < 16; ++j) {
          packed[b * 16 + j] =
              static_cast<uint8_t>(codes[static_cast<size_t>(32 * b + j)] |
                                   codes[static_cast<size_t>(32 * b + 16 + j)] << 4);
        }
      }
    }
  });
  return q;
}

at::Tensor DequantizeRowsInt4(const at::Tensor& values, const at::Tensor& params) {
  return kernels::DequantizeInt4(values.contiguous(), params.contiguous());
}

Status CheckInt4Groups(const ModelWeights& w, int64_t group, const std::string& model) {
  if (!IsInt4Group(group)) {
    return Error(ErrorCode::kInvalidRequest, "model " + model + ": int4 groups of " +
                                                 std::to_string(group) +
                                                 " weights are not one of 32, 64, 128");
  }
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights& l = w.layers[i];
    for (const auto& [name, matrix] :
         {std::pair<const char*, const at::Tensor*>{"qkv_proj", &l.qkv_proj},
          {"o_proj", &l.o_proj},
          {"gate_up_proj", &l.gate_up_proj},
          {"down_proj", &l.down_proj}}) {
      const int64_t in = matrix->size(1);
      if (in % group != 0) {
        return Error(ErrorCode::kInvalidRequest,
                     "model " + model + ": quantize int4 needs groups of " + std::to_string(group) +
                         " weights to divide every projection's input "
                         "width, and layer " +
                         std::to_string(i) + "'s " + name + " has " + std::to_string(in) +
                         "; load it with quantize = int8 or none");
      }
    }
  }
  return Status::Ok();
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

void QuantizeProjections(ModelWeights& w, Quantization q, int64_t group) {
  // Everything new first, so that a failed allocation leaves w untouched.
  std::vector<LayerWeights> layers = w.layers;
  for (LayerWeights& l : layers) {
    const auto quantize = [q, group](at::Tensor& matrix, at::Tensor& scale) {
      if (q == Quantization::kInt4) {
        QuantizedGroups g = QuantizeRowsInt4(matrix, group);
        matrix = std::move(g.values);
        scale = std::move(g.params);
        return;
      }
      QuantizedRows r = QuantizeRowsInt8(matrix);
      matrix = std::move(r.values);
      scale = std::move(r.scales);
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
