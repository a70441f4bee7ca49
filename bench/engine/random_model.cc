#include "bench/engine/random_model.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "daemon/engine/safetensors.h"

namespace medq::bench {
namespace {

// xorshift64*: fast enough for ~500M values.
uint16_t RandomBf16(uint64_t* state, float scale) {
  uint64_t x = *state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  const float u = static_cast<float>((x * 0x2545F4914F6CDD1Dull) >> 40) / float(1 << 24);
  const float v = (2.0f * u - 1.0f) * scale;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);
}

struct Blob {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint16_t> data;
};

Blob Make(std::string name, std::vector<int64_t> shape, float scale, uint64_t* state) {
  Blob b{std::move(name), std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : b.shape)
    n *= d;
  b.data.resize(static_cast<size_t>(n));
  if (scale == 0) {
    std::fill(b.data.begin(), b.data.end(), uint16_t{0x3f80});  // bf16 1.0
  } else {
    for (auto& v : b.data)
      v = RandomBf16(state, scale);
  }
  return b;
}

}  // namespace

std::vector<ModelShape> BenchShapes() {
  return {
      {"SmolLM-135M", "LlamaForCausalLM", 576, 30, 9, 3, 1536, 49152, false, true, 10000.0},
      {"Qwen2.5-0.5B", "Qwen2ForCausalLM", 896, 24, 14, 2, 4864, 151936, true, true, 1000000.0},
  };
}

std::vector<ModelShape> LargeShapes() {
  return {
      {"Mistral-7B", "LlamaForCausalLM", 4096, 32, 32, 8, 14336, 32768, false, false, 1000000.0},
  };
}

Status WriteRandomModel(const ModelShape& s, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  // model_type too, so that transformers loads the same folder
  // (bench/engine/hf_generate.py).
  const nlohmann::json config = {
      {"architectures", {s.architecture}},
      {"model_type", s.architecture == "Qwen2ForCausalLM" ? "qwen2" : "llama"},
      {"hidden_size", s.hidden},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"intermediate_size", s.intermediate},
      {"vocab_size", s.vocab},
      {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", s.rope_theta},
      {"tie_word_embeddings", s.tied},
      {"hidden_act", "silu"},
      {"torch_dtype", "bfloat16"},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
  };
  std::ofstream(dir / "config.json") << config.dump(2);

  uint64_t state = 0x9E3779B97F4A7C15ull;
  const int64_t h = s.hidden, d = s.hidden / s.heads, kv = s.kv_heads * d, i = s.intermediate;
  std::vector<Blob> blobs;
  blobs.push_back(Make("model.embed_tokens.weight", {s.vocab, h}, 0.05f, &state));
  blobs.push_back(Make("model.norm.weight", {h}, 0, &state));
  if (!s.tied) blobs.push_back(Make("lm_head.weight", {s.vocab, h}, 0.05f, &state));
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    blobs.push_back(Make(p + "input_layernorm.weight", {h}, 0, &state));
    blobs.push_back(Make(p + "post_attention_layernorm.weight", {h}, 0, &state));
    blobs.push_back(Make(p + "self_attn.q_proj.weight", {h, h}, 0.05f, &state));
    blobs.push_back(Make(p + "self_attn.k_proj.weight", {kv, h}, 0.05f, &state));
    blobs.push_back(Make(p + "self_attn.v_proj.weight", {kv, h}, 0.05f, &state));
    blobs.push_back(Make(p + "self_attn.o_proj.weight", {h, h}, 0.05f, &state));
    if (s.qkv_bias) {
      blobs.push_back(Make(p + "self_attn.q_proj.bias", {h}, 0.05f, &state));
      blobs.push_back(Make(p + "self_attn.k_proj.bias", {kv}, 0.05f, &state));
      blobs.push_back(Make(p + "self_attn.v_proj.bias", {kv}, 0.05f, &state));
    }
    blobs.push_back(Make(p + "mlp.gate_proj.weight", {i, h}, 0.05f, &state));
    blobs.push_back(Make(p + "mlp.up_proj.weight", {i, h}, 0.05f, &state));
    blobs.push_back(Make(p + "mlp.down_proj.weight", {h, i}, 0.05f, &state));
  }
  std::vector<engine::StWriteTensor> tensors;
  for (const auto& b : blobs) {
    tensors.push_back({b.name, engine::StDtype::kBF16, b.shape, b.data.data(), b.data.size() * 2});
  }
  return engine::WriteSafetensors(dir / "model.safetensors", tensors);
}

}  // namespace medq::bench
