#include "tools/medq-train/model_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>

#include "daemon/engine/model.h"
#include "daemon/engine/model_config.h"
#include "daemon/engine/rope.h"
#include "daemon/engine/safetensors.h"
#include "daemon/engine/transformer.h"

namespace medq::train {
namespace {

namespace fs = std::filesystem;
using engine::LayerWeights;
using engine::Model;

// GPT-2's initialisation: N(0, 0.02), with the projections that write into
// the residual stream scaled down by sqrt(2 · layers); norms start at 1.
at::Tensor Param(std::vector<int64_t> shape, double std) {
  return (torch::randn(shape) * std).set_requires_grad(true);
}
at::Tensor Ones(int64_t n) {
  return torch::ones({n}).set_requires_grad(true);
}

void InitWeights(Model& m) {
  const engine::ModelConfig& c = m.config;
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const double out_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
  m.weights.embed = Param({c.vocab_size, h}, 0.02);
  m.weights.lm_head = m.weights.embed;  // tied
  m.weights.norm = Ones(h);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights l;
    l.input_norm = Ones(h);
    l.post_norm = Ones(h);
    l.qkv_proj = Param({q + 2 * kv, h}, 0.02);
    l.o_proj = Param({h, q}, out_std);
    l.gate_up_proj = Param({2 * c.intermediate_size, h}, 0.02);
    l.down_proj = Param({h, c.intermediate_size}, out_std);
    m.weights.layers.push_back(std::move(l));
  }
}

// Matrices get weight decay; norms do not.
void CollectParameters(Model& m, std::vector<at::Tensor>* matrices,
                       std::vector<at::Tensor>* vectors) {
  matrices->push_back(m.weights.embed);
  vectors->push_back(m.weights.norm);
  for (LayerWeights& l : m.weights.layers) {
    for (at::Tensor* t : {&l.qkv_proj, &l.o_proj, &l.gate_up_proj, &l.down_proj})
      matrices->push_back(*t);
    vectors->push_back(l.input_norm);
    vectors->push_back(l.post_norm);
  }
}

// ids [n, context + 1] from the windows starting at `offsets`.
at::Tensor Windows(const std::vector<int32_t>& data, const std::vector<int64_t>& offsets,
                   int64_t length) {
  at::Tensor out = torch::empty({static_cast<int64_t>(offsets.size()), length}, torch::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (size_t r = 0; r < offsets.size(); ++r) {
    for (int64_t i = 0; i < length; ++i)
      a[static_cast<int64_t>(r)][i] = data[static_cast<size_t>(offsets[r] + i)];
  }
  return out;
}

// Mean next-token cross-entropy of ids [n, T + 1].
at::Tensor Loss(const Model& m, const at::Tensor& ids) {
  const int64_t t = ids.size(1) - 1;
  const at::Tensor logits = engine::ForwardSequence(m, ids.narrow(1, 0, t));
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              ids.narrow(1, 1, t).reshape({-1}));
}

double Evaluate(const Model& m, const std::vector<int32_t>& data, const TrainOptions& o,
                int64_t length) {
  torch::NoGradGuard no_grad;
  const int64_t available = static_cast<int64_t>(data.size()) / length;
  const int64_t windows = std::min(o.eval_windows, available);
  double total = 0;
  for (int64_t first = 0; first < windows; first += o.batch) {
    std::vector<int64_t> offsets;
    for (int64_t w = first; w < std::min(windows, first + o.batch); ++w)
      offsets.push_back(w * length);
    total += Loss(m, Windows(data, offsets, length)).item<double>() *
             static_cast<double>(offsets.size());
  }
  return total / static_cast<double>(windows);
}

double LearningRate(const TrainOptions& o, int64_t step) {
  if (step < o.warmup_steps) return o.lr * static_cast<double>(step + 1) / o.warmup_steps;
  const double progress = static_cast<double>(step - o.warmup_steps) /
                          static_cast<double>(std::max<int64_t>(1, o.steps - o.warmup_steps));
  const double cosine = 0.5 * (1 + std::cos(M_PI * std::min(1.0, progress)));
  return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * cosine);
}

Status WriteJson(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) return Error(ErrorCode::kInternal, "cannot write " + path.string());
  return Status();
}

// The model in Hugging Face layout: q/k/v and gate/up split back out of the
// stacked matrices, everything bf16.
Status SaveModel(const Model& m, const ModelShape& shape, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const engine::ModelConfig& c = m.config;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::vector<std::pair<std::string, at::Tensor>> named;
  named.emplace_back("model.embed_tokens.weight", m.weights.embed);
  named.emplace_back("model.norm.weight", m.weights.norm);
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    named.emplace_back(p + "input_layernorm.weight", l.input_norm);
    named.emplace_back(p + "post_attention_layernorm.weight", l.post_norm);
    named.emplace_back(p + "self_attn.q_proj.weight", l.qkv_proj.narrow(0, 0, q));
    named.emplace_back(p + "self_attn.k_proj.weight", l.qkv_proj.narrow(0, q, kv));
    named.emplace_back(p + "self_attn.v_proj.weight", l.qkv_proj.narrow(0, q + kv, kv));
    named.emplace_back(p + "self_attn.o_proj.weight", l.o_proj);
    named.emplace_back(p + "mlp.gate_proj.weight",
                       l.gate_up_proj.narrow(0, 0, c.intermediate_size));
    named.emplace_back(p + "mlp.up_proj.weight",
                       l.gate_up_proj.narrow(0, c.intermediate_size, c.intermediate_size));
    named.emplace_back(p + "mlp.down_proj.weight", l.down_proj);
  }
  std::vector<at::Tensor> keep;
  std::vector<engine::StWriteTensor> tensors;
  for (const auto& [name, t] : named) {
    keep.push_back(t.detach().to(torch::kBFloat16).contiguous());
    const at::Tensor& b = keep.back();
    tensors.push_back({name, engine::StDtype::kBF16, b.sizes().vec(), b.data_ptr(),
                       static_cast<size_t>(b.numel()) * 2});
  }
  // Written beside, then renamed: a reader never sees half a file.
  const Status written = engine::WriteSafetensors(dir / "model.safetensors.tmp", tensors);
  if (!written.ok()) return written;
  fs::rename(dir / "model.safetensors.tmp", dir / "model.safetensors", ec);
  if (ec) return Error(ErrorCode::kInternal, "cannot rename into " + dir.string());
  const Status config = WriteJson(dir / "config.json", ConfigJson(shape));
  if (!config.ok()) return config;
  return WriteJson(dir / "generation_config.json",
                   {{"bos_token_id", shape.eos_id}, {"eos_token_id", shape.eos_id}});
}

}  // namespace

nlohmann::json ConfigJson(const ModelShape& s) {
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", s.vocab},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.intermediate},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"head_dim", s.hidden / std::max<int64_t>(1, s.heads)},
      {"max_position_embeddings", s.context},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", 10000.0},
      {"tie_word_embeddings", true},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"torch_dtype", "bfloat16"},
      {"bos_token_id", s.eos_id},
      {"eos_token_id", s.eos_id},
  };
}

Result<TrainReport> TrainModel(const ModelShape& shape, const TrainOptions& o,
                               const std::vector<int32_t>& train,
                               const std::vector<int32_t>& validation, const fs::path& out_dir,
                               const std::function<void(const CurvePoint&)>& on_eval,
                               const std::function<void(const TrainReport&)>& on_save) {
  auto config = engine::ParseModelConfig(ConfigJson(shape), nullptr, "the training shape");
  if (!config.ok()) return std::move(config).error();
  const int64_t length = shape.context + 1;
  if (static_cast<int64_t>(train.size()) <= length ||
      static_cast<int64_t>(validation.size()) < length) {
    return Error(ErrorCode::kInvalidRequest, "the corpus is shorter than one training window of " +
                                                 std::to_string(length) + " tokens");
  }
  using Clock = std::chrono::steady_clock;
  try {
    if (o.threads > 0) at::set_num_threads(o.threads);
    torch::manual_seed(o.seed);
    Model m;
    m.config = *config;
    m.inv_freq = engine::RopeInvFreq(m.config);
    InitWeights(m);
    std::vector<at::Tensor> matrices, vectors, all;
    CollectParameters(m, &matrices, &vectors);
    all.insert(all.end(), matrices.begin(), matrices.end());
    all.insert(all.end(), vectors.begin(), vectors.end());
    TrainReport report;
    for (const at::Tensor& t : all)
      report.parameters += t.numel();

    using torch::optim::AdamWOptions;
    auto decay = std::make_unique<AdamWOptions>(o.lr);
    decay->betas({0.9, 0.95}).weight_decay(o.weight_decay);
    auto no_decay = std::make_unique<AdamWOptions>(o.lr);
    no_decay->betas({0.9, 0.95}).weight_decay(0.0);
    torch::optim::AdamW optimizer({torch::optim::OptimizerParamGroup(matrices, std::move(decay)),
                                   torch::optim::OptimizerParamGroup(vectors, std::move(no_decay))},
                                  AdamWOptions(o.lr));

    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int64_t> offset(0, static_cast<int64_t>(train.size()) - length);
    const auto t0 = Clock::now();
    const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    double loss_sum = 0;
    int64_t loss_steps = 0;
    for (int64_t step = 0; step < o.steps; ++step) {
      for (auto& group : optimizer.param_groups())
        static_cast<AdamWOptions&>(group.options()).lr(LearningRate(o, step));
      std::vector<int64_t> offsets;
      for (int64_t b = 0; b < o.batch; ++b)
        offsets.push_back(offset(rng));
      optimizer.zero_grad();
      const at::Tensor loss = Loss(m, Windows(train, offsets, length));
      loss.backward();
      torch::nn::utils::clip_grad_norm_(all, o.clip_norm);
      optimizer.step();
      loss_sum += loss.item<double>();
      ++loss_steps;
      report.tokens_seen += o.batch * shape.context;

      const bool last = step + 1 == o.steps;
      if ((step + 1) % o.eval_every == 0 || last) {
        report.curve.push_back({step + 1, loss_sum / static_cast<double>(loss_steps),
                                Evaluate(m, validation, o, length), seconds()});
        on_eval(report.curve.back());
        loss_sum = 0;
        loss_steps = 0;
      }
      if ((step + 1) % o.save_every == 0 || last) {
        report.seconds = seconds();
        const Status saved = SaveModel(m, shape, out_dir);
        if (!saved.ok()) return saved.error();
        on_save(report);
      }
    }
    return report;
  } catch (const c10::Error& e) {
    return Error(ErrorCode::kInternal,
                 std::string("training failed: ") + e.what_without_backtrace());
  }
}

}  // namespace medq::train
