#include "daemon/engine/weights.h"

#include "daemon/engine/host_memory.h"
#include "daemon/engine/prequantized.h"

namespace medq::engine {
namespace {

class Builder {
 public:
  Builder(std::map<std::string, CheckpointTensor> tensors, const WeightPlacement& placement)
      : tensors_(std::move(tensors)), placement_(placement) {}

  Status Take(const std::string& name, at::IntArrayRef shape, at::ScalarType dtype,
              at::Tensor* out) {
    return TakeTensor(tensors_, name, shape, placement_.device, dtype, out);
  }
  Status Matrix(const std::string& name, at::IntArrayRef shape, at::Tensor* out) {
    return Take(name, shape, placement_.weight_dtype, out);
  }
  Status Vector(const std::string& name, int64_t n, at::Tensor* out) {
    return Take(name, {n}, placement_.compute_dtype, out);
  }
  // Layer `prefix`'s projections from a pre-quantized checkpoint, as int4.
  Status Int4Projections(const ModelConfig& c, const std::string& prefix, LayerWeights& l) {
    return TakeInt4Projections(tensors_, placement_.prequantized, c, prefix, l);
  }
  // Every tensor not taken, except ones transformers ignores too, is an error.
  Status CheckNoneLeft(bool tied) const {
    return engine::CheckNoneLeft(tensors_, [tied](const std::string& name) {
      return name.ends_with("rotary_emb.inv_freq") || (tied && name == "lm_head.weight");
    });
  }

 private:
  std::map<std::string, CheckpointTensor> tensors_;
  WeightPlacement placement_;
};

#define MEDQ_TAKE(expr)                        \
  do {                                         \
    const Status medq_s_ = (expr);             \
    if (!medq_s_.ok()) return medq_s_.error(); \
  } while (0)

}  // namespace

Result<ModelWeights> BuildWeights(const ModelConfig& c,
                                  std::map<std::string, CheckpointTensor> tensors,
                                  const WeightPlacement& placement) {
  Builder b(std::move(tensors), placement);
  ModelWeights w;
  const int64_t h = c.hidden_size, d = c.head_dim, q_out = c.num_heads * c.head_dim,
                kv_out = c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  MEDQ_TAKE(b.Matrix("model.embed_tokens.weight", {c.vocab_size, h}, &w.embed));
  MEDQ_TAKE(b.Vector("model.norm.weight", h, &w.norm));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
  } else {
    MEDQ_TAKE(b.Matrix("lm_head.weight", {c.vocab_size, h}, &w.lm_head));
  }
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    MEDQ_TAKE(b.Vector(p + "input_layernorm.weight", h, &l.input_norm));
    MEDQ_TAKE(b.Vector(p + "post_attention_layernorm.weight", h, &l.post_norm));
    if (placement.prequantized.format != PrequantizedFormat::kNone) {
      MEDQ_TAKE(b.Int4Projections(c, p, l));
    } else {
      MEDQ_TAKE(b.Matrix(p + "self_attn.q_proj.weight", {q_out, h}, &l.q_proj));
      MEDQ_TAKE(b.Matrix(p + "self_attn.k_proj.weight", {kv_out, h}, &l.k_proj));
      MEDQ_TAKE(b.Matrix(p + "self_attn.v_proj.weight", {kv_out, h}, &l.v_proj));
      MEDQ_TAKE(b.Matrix(p + "self_attn.o_proj.weight", {h, q_out}, &l.o_proj));
      MEDQ_TAKE(b.Matrix(p + "mlp.gate_proj.weight", {inter, h}, &l.gate_proj));
      MEDQ_TAKE(b.Matrix(p + "mlp.up_proj.weight", {inter, h}, &l.up_proj));
      MEDQ_TAKE(b.Matrix(p + "mlp.down_proj.weight", {h, inter}, &l.down_proj));
    }
    if (c.qkv_bias) {
      MEDQ_TAKE(b.Vector(p + "self_attn.q_proj.bias", q_out, &l.q_bias));
      MEDQ_TAKE(b.Vector(p + "self_attn.k_proj.bias", kv_out, &l.k_bias));
      MEDQ_TAKE(b.Vector(p + "self_attn.v_proj.bias", kv_out, &l.v_bias));
    }
    if (c.o_bias) MEDQ_TAKE(b.Vector(p + "self_attn.o_proj.bias", h, &l.o_bias));
    if (c.qk_norm) {
      MEDQ_TAKE(b.Vector(p + "self_attn.q_norm.weight", d, &l.q_norm));
      MEDQ_TAKE(b.Vector(p + "self_attn.k_norm.weight", d, &l.k_norm));
    }
    if (c.mlp_bias) {
      MEDQ_TAKE(b.Vector(p + "mlp.gate_proj.bias", inter, &l.gate_bias));
      MEDQ_TAKE(b.Vector(p + "mlp.up_proj.bias", inter, &l.up_bias));
      MEDQ_TAKE(b.Vector(p + "mlp.down_proj.bias", h, &l.down_bias));
    }
    FuseProjections(l);
  }
  MEDQ_TAKE(b.CheckNoneLeft(c.tie_word_embeddings));
  return w;
}

namespace {

// Stacks `parts` (all defined or all undefined) into *stacked and points each
// part at its row range of it.
void Stack(std::initializer_list<at::Tensor*> parts, at::Tensor* stacked) {
  std::vector<at::Tensor> list;
  bool already_views = stacked->defined();
  int64_t offset = 0;
  for (const at::Tensor* p : parts) {
    if (!p->defined()) return;
    list.push_back(*p);
    already_views = already_views && p->storage().is_alias_of(stacked->storage()) &&
                    p->data_ptr() == stacked->narrow(0, offset, p->size(0)).data_ptr();
    offset += p->size(0);
  }
  if (already_views) return;  // untouched since the last stacking: keep sharing it
  if (list.front().device().is_cpu()) {
    std::vector<int64_t> sizes = list.front().sizes().vec();
    sizes[0] = offset;  // all parts' rows
    *stacked = EmptyHostWeight(sizes, list.front().scalar_type());
    at::cat_out(*stacked, list, 0);
  } else {
    *stacked = at::cat(list, 0).contiguous();
  }
  int64_t row = 0;
  for (at::Tensor* p : parts) {
    const int64_t n = p->size(0);
    *p = stacked->narrow(0, row, n);
    row += n;
  }
}

}  // namespace

void FuseProjections(LayerWeights& l) {
  Stack({&l.q_proj, &l.k_proj, &l.v_proj}, &l.qkv_proj);
  Stack({&l.q_bias, &l.k_bias, &l.v_bias}, &l.qkv_bias);
  Stack({&l.gate_proj, &l.up_proj}, &l.gate_up_proj);
  Stack({&l.gate_bias, &l.up_bias}, &l.gate_up_bias);
}

at::Tensor* ProjectionWeight(LayerWeights& layer, std::string_view module) {
  if (module == "q_proj") return &layer.q_proj;
  if (module == "k_proj") return &layer.k_proj;
  if (module == "v_proj") return &layer.v_proj;
  if (module == "o_proj") return &layer.o_proj;
  if (module == "gate_proj") return &layer.gate_proj;
  if (module == "up_proj") return &layer.up_proj;
  if (module == "down_proj") return &layer.down_proj;
  return nullptr;
}

int64_t ParameterBytes(const ModelWeights& w) {
  std::vector<const void*> seen;
  int64_t total = 0;
  const auto add = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    const void* key = t.storage().unsafeGetStorageImpl();
    for (const void* s : seen) {
      if (s == key) return;
    }
    seen.push_back(key);
    total += static_cast<int64_t>(t.storage().nbytes());
  };
  add(w.embed);
  add(w.norm);
  add(w.lm_head);
  add(w.lm_head_packed);
  add(w.embed_scale);
  add(w.lm_head_scale);
  for (const auto& l : w.layers) {
    for (const at::Tensor* t :
         {&l.qkv_proj,    &l.qkv_bias,  &l.gate_up_proj, &l.gate_up_bias,  &l.input_norm,
          &l.post_norm,   &l.q_proj,    &l.k_proj,       &l.v_proj,        &l.o_proj,
          &l.q_bias,      &l.k_bias,    &l.v_bias,       &l.o_bias,        &l.q_norm,
          &l.k_norm,      &l.gate_proj, &l.up_proj,      &l.down_proj,     &l.gate_bias,
          &l.up_bias,     &l.down_bias, &l.qkv_packed,   &l.o_packed,      &l.gate_up_packed,
          &l.down_packed, &l.qkv_scale, &l.o_scale,      &l.gate_up_scale, &l.down_scale}) {
      add(*t);
    }
  }
  return total;
}

}  // namespace medq::engine
