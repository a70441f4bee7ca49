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

// The candidate ranges ChooseInt4Group tries beside the full one: 12 to 16
// steps over [min, max], in kInt4SearchSteps equal increments (llama.cpp's
// Q4_K tries 14 to 15.5 in 16; on medq-demo 12 to 16 in 9 gave the smaller
// perplexity increase at the default groups of 64, bench/quality/README.md,
// at about half the search's cost).
constexpr int kInt4SearchSteps = 8;

// v as bf16 bits, rounded up (toward +inf) or down: the full-range choice's
// [m, m + 15 s] must hold the group's weights.
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

// v (finite) as bf16 bits, rounded to nearest even from its float32
// rounding: the searched scale and minimum, which need not cover the group.
uint16_t Bf16Nearest(double v) {
  const auto f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// One group's candidate: its stored scale and minimum and the squared error
// of its dequantized weights.
struct Int4Choice {
  uint16_t s_bits = 0, m_bits = 0;
  double sse = INFINITY;
};

// The codes q = clamp(round((w - m) / s), 0, 15) of the group `v` for the
// stored s and m (the nearest level of the range for every weight, so the
// best codes for that s and m), written to `codes` when not null, and the
// squared error of fma(q, s, m) in float32, as the kernels dequantize. A NaN
// weight codes 0 and is left out of the error.
double Int4GroupError(const float* v, int64_t n, uint16_t s_bits, uint16_t m_bits, uint8_t* codes) {
  const double s = Bf16Value(s_bits), m = Bf16Value(m_bits);
  const auto sf = static_cast<float>(s), mf = static_cast<float>(m);
  const double inverse = s > 0.0 ? 1.0 / s : 0.0;
  double sse = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    const double c = std::nearbyint((static_cast<double>(v[k]) - m) * inverse);
    const uint8_t q = std::isnan(c) ? 0 : static_cast<uint8_t>(std::clamp(c, 0.0, 15.0));
    if (codes != nullptr) codes[k] = q;
    if (std::isnan(v[k])) continue;
    // q · s is exact in float32 (4 bits times bf16's 8), so this rounds
    // once, as fma(q, s, m) does, without a call to fmaf where the target
    // has no FMA instruction.
    const double e = static_cast<double>(v[k]) - (static_cast<float>(q) * sf + mf);
    sse += e * e;
  }
  return sse;
}

// The sums over a group's codes q and its weights' offsets x = w - lo
// (float32, lo the group's minimum) that a least-squares fit needs.
struct Int4Sums {
  double q = 0, qq = 0, qx = 0;
};

// Four float32 lanes (GCC's and Clang's vector extension; one SSE2 or NEON
// register), so that the candidate search runs on vectors on any target:
// the compiler does not vectorize the clamp and the sums from scalar code.
typedef float Int4Lanes __attribute__((vector_size(16)));

// The codes clamp(round((x - offset) · inverse), 0, 15) of the group's x
// (n a multiple of 4; rounding to nearest even by adding and taking away
// 1.5 · 2^23) and their sums, in float32 (exact for the codes' sums:
// integers below 2^24).
Int4Sums Int4CandidateSums(const float* x, int64_t n, float offset, float inverse) {
  const Int4Lanes round = Int4Lanes{} + 0x1.8p23f, zero = Int4Lanes{},
                  fifteen = Int4Lanes{} + 15.0f;
  Int4Lanes sum_q{}, sum_qq{}, sum_qx{};
  for (int64_t k = 0; k < n; k += 4) {
    Int4Lanes xv;
    std::memcpy(&xv, x + k, sizeof(xv));
    Int4Lanes q = ((xv - offset) * inverse + round) - round;
    q = q > zero ? q : zero;
    q = q < fifteen ? q : fifteen;
    sum_q += q;
    sum_qq += q * q;
    sum_qx += q * xv;
  }
  Int4Sums sums;
  for (int j = 0; j < 4; ++j) {
    sums.q += sum_q[j];
    sums.qq += sum_qq[j];
    sums.qx += sum_qx[j];
  }
  return sums;
}

// The least-squares scale and minimum for codes with sums `c` (minimising
// sum (x - (q s + m'))^2 over s and m', with m = m' + lo), rounded to bf16,
// and the squared error those give with those codes, from the sums (an
// estimate to rank candidates by; float32 sums). No candidate (sse
// infinite) when the codes are all one value or give no positive scale.
Int4Choice Int4Refit(const Int4Sums& c, double n, double sum_x, double sum_xx, double lo) {
  const double det = n * c.qq - c.q * c.q;
  Int4Choice choice;
  if (!(det > 0)) return choice;
  const double s = (n * c.qx - c.q * sum_x) / det;
  const double m = (c.qq * sum_x - c.q * c.qx) / det;
  if (!(s > 0) || !std::isfinite(s) || !std::isfinite(m)) return choice;
  choice.s_bits = Bf16Nearest(s);
  choice.m_bits = Bf16Nearest(m + lo);
  const double sr = Bf16Value(choice.s_bits), mr = Bf16Value(choice.m_bits) - lo;
  if (!(sr > 0) || !std::isfinite(sr) || !std::isfinite(mr)) return choice;
  choice.sse =
      sum_xx - 2 * sr * c.qx - 2 * mr * sum_x + sr * sr * c.qq + 2 * sr * mr * c.q + n * mr * mr;
  return choice;
}

// The group's scale and minimum and its codes: the full range's (m its
// minimum rounded down, s = (max - m) / 15 rounded up: every weight
// covered), or, where it scores a smaller squared error, the best of a
// search in the manner of llama.cpp's make_qkx2_quants. Each candidate
// spans [min, max] with 12 to 16 steps (so clipping the ends, or leaving
// part of a level unused), codes the group on it, and refits s and m to
// those codes by least squares, rounded to bf16; the best by its estimated
// error is coded again with its own s and m and refitted, twice. The
// winner and the full range are then both scored exactly (Int4GroupError,
// in double) and the full range kept unless the other is strictly better:
// deterministic, and never worse than the full range. A group with a NaN
// weight keeps the full range.
Int4Choice ChooseInt4Group(const float* v, int64_t n, float* x, uint8_t* codes, uint8_t* scratch) {
  float lo = INFINITY, hi = -INFINITY;
  bool nan = false;
  for (int64_t k = 0; k < n; ++k) {
    lo = std::fmin(lo, v[k]);
    hi = std::fmax(hi, v[k]);
    nan = nan || std::isnan(v[k]);
  }
  if (lo > hi) lo = hi = 0.0f;  // every weight NaN
  Int4Choice full;
  full.m_bits = Bf16Toward(lo, false);
  full.s_bits = Bf16Toward((static_cast<double>(hi) - Bf16Value(full.m_bits)) / 15.0, true);
  full.sse = Int4GroupError(v, n, full.s_bits, full.m_bits, codes);
  const double range = static_cast<double>(hi) - lo;
  if (nan || !(range > 0) || full.sse == 0.0) return full;
  double sum_x = 0, sum_xx = 0;
  for (int64_t k = 0; k < n; ++k) {
    x[k] = v[k] - lo;
    sum_x += x[k];
    sum_xx += static_cast<double>(x[k]) * x[k];
  }
  const auto nd = static_cast<double>(n);
  Int4Choice best;
  for (int step = 0; step <= kInt4SearchSteps; ++step) {
    const auto inverse = static_cast<float>((12.0 + 4.0 * step / kInt4SearchSteps) / range);
    const Int4Choice c = Int4Refit(Int4CandidateSums(x, n, 0.0f, inverse), nd, sum_x, sum_xx, lo);
    if (c.sse < best.sse) best = c;
  }
  for (int round = 0; round < 2 && std::isfinite(best.sse); ++round) {
    const double s = Bf16Value(best.s_bits), m = Bf16Value(best.m_bits) - lo;
    const Int4Choice c =
        Int4Refit(Int4CandidateSums(x, n, static_cast<float>(m), static_cast<float>(1.0 / s)), nd,
                  sum_x, sum_xx, lo);
    if (c.sse < best.sse) best = c;
  }
  if (!std::isfinite(best.sse)) return full;
  best.sse = Int4GroupError(v, n, best.s_bits, best.m_bits, scratch);
  if (!(best.sse < full.sse)) return full;
  std::memcpy(codes, scratch, static_cast<size_t>(n));
  return best;
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
    std::vector<uint8_t> codes(static_cast<size_t>(in)), scratch(static_cast<size_t>(group));
    std::vector<float> shifted(static_cast<size_t>(group));
    const int64_t end = std::min(out, (chunk + 1) * rows_per_chunk);
    for (int64_t r = chunk * rows_per_chunk; r < end; ++r) {
      const float* row = src + r * in;
      for (int64_t g = 0; g < groups; ++g) {
        const float* v = row + g * group;
        // The codes from the stored s and m, as the kernels will read them.
        const Int4Choice c =
            ChooseInt4Group(v, group, shifted.data(), codes.data() + g * group, scratch.data());
        params[(r * groups + g) * 2] = c.s_bits;
        params[(r * groups + g) * 2 + 1] = c.m_bits;
      }
      kernels::PackInt4Row(codes.data(), in, dst + r * (in / 2));
    }
  });
  return q;
}

at::Tensor Int4Codes(const at::Tensor& values) {
  // Each byte's low and high nibble side by side, then gathered into weight
  // order.
  const int64_t out = values.size(0), in = 2 * values.size(1);
  const at::Tensor nibbles =
      at::stack({values.bitwise_and(15), values.bitwise_right_shift(4)}, 2).view({out, in});
  return nibbles.index_select(
      1, at::tensor(kernels::Int4CodeOrder(in), at::kLong).to(values.device()));
}

at::Tensor DequantizeRowsInt4(const at::Tensor& values, const at::Tensor& params) {
  if (values.device().is_cpu()) {
    return kernels::DequantizeInt4(values.contiguous(), params.contiguous());
  }
  // Elsewhere (a GPU's quantized embeddings) with LibTorch's ops: q · s + m
  // in float32, two roundings where the CPU's kernels fuse them.
  const int64_t out = values.size(0), in = 2 * values.size(1), groups = params.size(1);
  const at::Tensor q = Int4Codes(values).to(at::kFloat);
  const at::Tensor p = params.to(at::kFloat).view({out, groups, 1, 2});
  return (q.view({out, groups, in / groups}) * p.select(3, 0) + p.select(3, 1)).view({out, in});
}

std::array<NamedProjection, 4> NamedProjections(const LayerWeights& l) {
  return {{{"qkv_proj", &l.qkv_proj},
           {"o_proj", &l.o_proj},
           {"gate_up_proj", &l.gate_up_proj},
           {"down_proj", &l.down_proj}}};
}

Status CheckInt4Groups(const ModelWeights& w, int64_t group, const std::string& model) {
  if (!IsInt4Group(group)) {
    return Error(ErrorCode::kInvalidRequest, "model " + model + ": int4 groups of " +
                                                 std::to_string(group) +
                                                 " weights are not one of 32, 64, 128");
  }
  for (size_t i = 0; i < w.layers.size(); ++i) {
    for (const auto& [name, matrix] : NamedProjections(w.layers[i])) {
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

void PointRowViews(LayerWeights& l) {
  PointAt({&l.q_proj, &l.k_proj, &l.v_proj}, l.qkv_proj);
  PointAt({&l.gate_proj, &l.up_proj}, l.gate_up_proj);
}

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
    PointRowViews(l);
    // The bf16 tiles were copies of the full-precision matrices.
    l.qkv_packed = at::Tensor();
    l.o_packed = at::Tensor();
    l.gate_up_packed = at::Tensor();
    l.down_packed = at::Tensor();
  }
  w.layers = std::move(layers);
}

}  // namespace medq::engine
