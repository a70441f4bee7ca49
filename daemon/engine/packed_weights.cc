#include "daemon/engine/packed_weights.h"

#include <algorithm>
#include <iterator>
#include <utility>

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
at::Tensor PackedCopy(const at::Tensor& matrix, const at::Tensor* base_matrix,
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

// A layer's matrices and their packed copies.
using Member = at::Tensor LayerWeights::*;
constexpr std::pair<Member, Member> kLayerPairs[] = {
    {&LayerWeights::qkv_proj, &LayerWeights::qkv_packed},
    {&LayerWeights::o_proj, &LayerWeights::o_packed},
    {&LayerWeights::gate_up_proj, &LayerWeights::gate_up_packed},
    {&LayerWeights::down_proj, &LayerWeights::down_packed},
};

}  // namespace

bool PackableProjections(const ModelWeights& w) {
  return Packable(w.lm_head) &&
         std::all_of(w.layers.begin(), w.layers.end(), [](const LayerWeights& l) {
           return std::all_of(std::begin(kLayerPairs), std::end(kLayerPairs),
                              [&l](const auto& pair) { return Packable(l.*pair.first); });
         });
}

void PackProjections(ModelWeights& w, const ModelWeights* base) {
  w.lm_head_packed = PackedCopy(w.lm_head, base ? &base->lm_head : nullptr,
                                base ? &base->lm_head_packed : nullptr);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const LayerWeights* b = base ? &base->layers[i] : nullptr;
    for (const auto& [matrix, packed] : kLayerPairs)
      l.*packed = PackedCopy(l.*matrix, b ? &(b->*matrix) : nullptr, b ? &(b->*packed) : nullptr);
  }
}

}  // namespace medq::engine
