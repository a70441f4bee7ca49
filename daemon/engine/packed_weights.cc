#include "daemon/engine/packed_weights.h"

#include <algorithm>

#include "daemon/engine/host_memory.h"
#include "daemon/engine/kernels/cpu_linear.h"

namespace medq::engine {
namespace {

bool Packable(const at::Tensor& w) {
  return w.defined() && w.device().is_cpu() && w.scalar_type() == at::kBFloat16 && w.dim() == 2 &&
         w.is_contiguous();
}

const uint16_t* Bits(const at::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
}

// The packed copy of `matrix`: the base's where `matrix` is still the base's
// tensor, a new one otherwise.
at::Tensor Packed(const at::Tensor& matrix, const at::Tensor* base_matrix,
                  const at::Tensor* base_packed) {
  if (base_matrix != nullptr && base_packed->defined() && base_matrix->is_same(matrix)) {
    return *base_packed;
  }
  const int64_t out = matrix.size(0), in = matrix.size(1);
  at::Tensor packed = EmptyHostWeight({kernels::PackedBf16Elements(out, in)}, at::kBFloat16);
  kernels::PackBf16Tiles(Bits(matrix), out, in,
                         reinterpret_cast<uint16_t*>(packed.data_ptr<at::BFloat16>()));
  return packed;
}

}  // namespace

bool PackableProjections(const ModelWeights& w) {
  return Packable(w.lm_head) &&
         std::all_of(w.layers.begin(), w.layers.end(), [](const LayerWeights& l) {
           return Packable(l.qkv_proj) && Packable(l.o_proj) && Packable(l.gate_up_proj) &&
                  Packable(l.down_proj);
         });
}

void PackProjections(ModelWeights& w, const ModelWeights* base) {
  w.lm_head_packed =
      Packed(w.lm_head, base ? &base->lm_head : nullptr, base ? &base->lm_head_packed : nullptr);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const LayerWeights* b = base ? &base->layers[i] : nullptr;
    l.qkv_packed = Packed(l.qkv_proj, b ? &b->qkv_proj : nullptr, b ? &b->qkv_packed : nullptr);
    l.o_packed = Packed(l.o_proj, b ? &b->o_proj : nullptr, b ? &b->o_packed : nullptr);
    l.gate_up_packed =
        Packed(l.gate_up_proj, b ? &b->gate_up_proj : nullptr, b ? &b->gate_up_packed : nullptr);
    l.down_packed = Packed(l.down_proj, b ? &b->down_proj : nullptr, b ? &b->down_packed : nullptr);
  }
}

}  // namespace medq::engine
