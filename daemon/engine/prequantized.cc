#include "daemon/engine/prequantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "daemon/engine/host_memory.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/work_sharing.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

// AWQ's GEMM packing holds output column 8c + j of word c in nibble
// kAwqNibble[j] (it packs in the order 0, 2, 4, 6, 1, 3, 5, 7).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string DimsOf(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// `name` from `tensors`, checked for its shape and dtype (one of `dtypes`),
// removed from the map. `optional`: absent gives an undefined tensor.
Status TakeChecked(std::map<std::string, CheckpointTensor>& tensors, const std::string& name,
                   at::IntArrayRef shape, std::initializer_list<at::ScalarType> dtypes,
                   const char* what, at::Tensor* out, bool optional = false) {
  const auto it = tensors.find(name);
  if (it == tensors.end()) {
    if (optional) return Status::Ok();
    return InvalidRequest("tensor '" + name +
                          "' is missing from the model's safetensors; config.json's "
                          "quantization_config needs it");
  }
  const at::Tensor& t = it->second.tensor;
  bool dtype_ok = false;
  for (at::ScalarType d : dtypes)
    dtype_ok = dtype_ok || t.scalar_type() == d;
  if (!dtype_ok) {
    return InvalidRequest("tensor '" + name + "' in " + it->second.file + " is " +
                          std::string(c10::toString(t.scalar_type())) + ", not " + what);
  }
  if (t.sizes() != shape) {
    return InvalidRequest("tensor '" + name + "' in " + it->second.file + " has shape " +
                          DimsOf(t.sizes()) + "; config.json and its quantization_config imply " +
                          DimsOf(shape));
  }
  *out = t.contiguous();
  tensors.erase(it);
  return Status::Ok();
}

// One projection's checkpoint tensors, checked.
struct Packed {
  std::string name;
  int64_t out = 0;
  at::Tensor qweight, qzeros, scales;  // scales as float32
};

Status TakePacked(std::map<std::string, CheckpointTensor>& tensors, const PrequantizedConfig& f,
                  const std::string& name, int64_t out, int64_t in, Packed* p) {
  const int64_t group = f.group == -1 ? in : f.group;
  if (out % 8 != 0 || in % group != 0 || Int4GroupFor(group, in) == 0) {
    return InvalidRequest("projection '" + name + "' is [" + std::to_string(out) + ", " +
                          std::to_string(in) + "], which 4-bit groups of " + std::to_string(group) +
                          " packed eight to an int32 do not tile (rows a multiple of 8, the "
                          "input a multiple of the group, the group a multiple of 32)");
  }
  const int64_t groups = in / group;
  const bool awq = f.format == PrequantizedFormat::kAwqGemm;
  p->name = name;
  p->out = out;
  const std::vector<int64_t> qshape =
      awq ? std::vector<int64_t>{in, out / 8} : std::vector<int64_t>{in / 8, out};
  MEDQ_RETURN_IF_ERROR(
      TakeChecked(tensors, name + ".qweight", qshape, {at::kInt}, "int32", &p->qweight));
  MEDQ_RETURN_IF_ERROR(
      TakeChecked(tensors, name + ".qzeros", {groups, out / 8}, {at::kInt}, "int32", &p->qzeros));
  at::Tensor scales;
  MEDQ_RETURN_IF_ERROR(TakeChecked(tensors, name + ".scales", {groups, out},
                                   {at::kHalf, at::kBFloat16, at::kFloat},
                                   "float16, bfloat16 or float32", &scales));
  p->scales = scales.to(at::kFloat).contiguous();  // exact
  if (!at::isfinite(p->scales).all().item<bool>()) {
    return InvalidRequest("tensor '" + name + ".scales' holds a value that is not finite");
  }
  if (!awq) {
    at::Tensor g_idx;
    MEDQ_RETURN_IF_ERROR(TakeChecked(tensors, name + ".g_idx", {in}, {at::kInt, at::kLong},
                                     "int32 or int64", &g_idx, /*optional=*/true));
    if (g_idx.defined() &&
        !at::equal(g_idx.to(at::kLong), at::arange(in, at::kLong).div(group, "floor"))) {
      return InvalidRequest("tensor '" + name +
                            ".g_idx' is not i / group_size for every input i: the checkpoint "
                            "permutes its groups (desc_act), which medq does not load");
    }
  }
  return Status::Ok();
}

// v rounded to the nearest bf16 (ties to even), as its bits.
uint16_t Bf16Nearest(float v) {
  return c10::BFloat16(v).x;
}

float Bf16ToFloat(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &widened, sizeof(f));
  return f;
}

// Writes `p`'s rows into rows [row0, row0 + p.out) of the stacked int4
// `values` / `params` (groups of `mgroup`).
void Unpack(const PrequantizedConfig& f, const Packed& p, int64_t in, int64_t mgroup, int64_t row0,
            uint8_t* values, uint16_t* params) {
  const bool awq = f.format == PrequantizedFormat::kAwqGemm;
  const int64_t out = p.out;
  const int64_t group = f.group == -1 ? in : f.group;
  const int64_t groups = in / group, mgroups = in / mgroup, words = out / 8;
  const auto* qw = reinterpret_cast<const uint32_t*>(p.qweight.data_ptr<int32_t>());
  const auto* qz = reinterpret_cast<const uint32_t*>(p.qzeros.data_ptr<int32_t>());
  const float* sc = p.scales.data_ptr<float>();
  constexpr int64_t kRows = 64;  // a chunk: 8 AWQ words across, rows of GPTQ's
  const int64_t chunks = (out + kRows - 1) / kRows;
  kernels::ShareWork(chunks, kernels::KernelThreads() - 1, [&](int64_t chunk) {
    const int64_t r0 = chunk * kRows, r1 = std::min(out, r0 + kRows);
    std::vector<uint8_t> codes(static_cast<size_t>((r1 - r0) * in));
    // The codes of rows [r0, r1), row-major, read in the checkpoint's order.
    if (awq) {
      for (int64_t k = 0; k < in; ++k) {
        for (int64_t r = r0; r < r1; ++r) {
          const uint32_t word = qw[k * words + r / 8];
          codes[static_cast<size_t>((r - r0) * in + k)] =
              static_cast<uint8_t>(word >> (4 * kAwqNibble[r % 8]) & 0xFu);
        }
      }
    } else {
      for (int64_t k8 = 0; k8 < in / 8; ++k8) {
        for (int64_t r = r0; r < r1; ++r) {
          const uint32_t word = qw[k8 * out + r];
          for (int64_t j = 0; j < 8; ++j) {
            codes[static_cast<size_t>((r - r0) * in + k8 * 8 + j)] =
                static_cast<uint8_t>(word >> (4 * j) & 0xFu);
          }
        }
      }
    }
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* c = codes.data() + (r - r0) * in;
      kernels::PackInt4Row(c, in, values + (row0 + r) * (in / 2));
      const int nibble = awq ? kAwqNibble[r % 8] : static_cast<int>(r % 8);
      uint16_t* pr = params + (row0 + r) * mgroups * 2;
      for (int64_t g = 0; g < groups; ++g) {
        const uint32_t zword = qz[g * words + r / 8];
        const auto z = static_cast<float>((zword >> (4 * nibble) & 0xFu) + f.zero_offset);
        const uint16_t s_bits = Bf16Nearest(sc[g * out + r]);
        // z · s' is exact in float32 (5 + 8 significant bits): one rounding.
        const uint16_t m_bits = Bf16Nearest(-z * Bf16ToFloat(s_bits));
        for (int64_t mg = g * (group / mgroup); mg < (g + 1) * (group / mgroup); ++mg) {
          pr[mg * 2] = s_bits;
          pr[mg * 2 + 1] = m_bits;
        }
      }
    }
  });
}

// The projections `names` (with their row counts), all `in` wide, stacked.
Status TakeStack(std::map<std::string, CheckpointTensor>& tensors, const PrequantizedConfig& f,
                 std::initializer_list<std::pair<std::string, int64_t>> parts, int64_t in,
                 at::Tensor* values, at::Tensor* params) {
  std::vector<Packed> packed(parts.size());
  int64_t rows = 0;
  size_t i = 0;
  for (const auto& [name, out] : parts) {
    MEDQ_RETURN_IF_ERROR(TakePacked(tensors, f, name, out, in, &packed[i++]));
    rows += out;
  }
  const int64_t mgroup = Int4GroupFor(f.group == -1 ? in : f.group, in);
  *values = EmptyHostWeight({rows, in / 2}, at::kByte);
  *params = at::empty({rows, in / mgroup, 2}, at::kBFloat16);
  auto* pp = reinterpret_cast<uint16_t*>(params->data_ptr<at::BFloat16>());
  int64_t row = 0;
  for (const Packed& p : packed) {
    Unpack(f, p, in, mgroup, row, values->data_ptr<uint8_t>(), pp);
    row += p.out;
  }
  return Status::Ok();
}

}  // namespace

int64_t Int4GroupFor(int64_t group, int64_t in) {
  if (group == -1) group = in;
  for (int64_t g : {128, 64, 32}) {
    if (group > 0 && group % g == 0) return g;
  }
  return 0;
}

Status TakeInt4Projections(std::map<std::string, CheckpointTensor>& tensors,
                           const PrequantizedConfig& f, const ModelConfig& c,
                           const std::string& prefix, LayerWeights& l) {
  const int64_t h = c.hidden_size, q_out = c.num_heads * c.head_dim,
                kv_out = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  const std::string a = prefix + "self_attn.", m = prefix + "mlp.";
  MEDQ_RETURN_IF_ERROR(
      TakeStack(tensors, f, {{a + "q_proj", q_out}, {a + "k_proj", kv_out}, {a + "v_proj", kv_out}},
                h, &l.qkv_proj, &l.qkv_scale));
  MEDQ_RETURN_IF_ERROR(TakeStack(tensors, f, {{a + "o_proj", h}}, q_out, &l.o_proj, &l.o_scale));
  MEDQ_RETURN_IF_ERROR(TakeStack(tensors, f, {{m + "gate_proj", inter}, {m + "up_proj", inter}}, h,
                                 &l.gate_up_proj, &l.gate_up_scale));
  MEDQ_RETURN_IF_ERROR(
      TakeStack(tensors, f, {{m + "down_proj", h}}, inter, &l.down_proj, &l.down_scale));
  l.q_proj = l.qkv_proj.narrow(0, 0, q_out);
  l.k_proj = l.qkv_proj.narrow(0, q_out, kv_out);
  l.v_proj = l.qkv_proj.narrow(0, q_out + kv_out, kv_out);
  l.gate_proj = l.gate_up_proj.narrow(0, 0, inter);
  l.up_proj = l.gate_up_proj.narrow(0, inter, inter);
  return Status::Ok();
}

}  // namespace medq::engine
