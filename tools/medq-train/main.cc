// medq-train: trains medq's built-in demo model from a text corpus: a
// byte-level BPE tokenizer, then a small LlamaForCausalLM trained with
// LibTorch's autograd through the engine's own forward pass. Writes a Hugging
// Face model directory (config.json, generation_config.json,
// model.safetensors in bf16, tokenizer.json, tokenizer_config.json) and
// training.json (options, corpus, loss curve). scripts/train-demo-model runs
// it with the settings of the shipped model.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "daemon/tokenizer/tokenizer.h"
#include "tools/medq-train/bpe_trainer.h"
#include "tools/medq-train/corpus.h"
#include "tools/medq-train/model_trainer.h"

namespace {

namespace fs = std::filesystem;
using medq::train::CurvePoint;
using medq::train::TrainReport;
using nlohmann::json;

constexpr const char* kEndOfText = "<|endoftext|>";

bool WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "medq-train: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trains medq's demo model (BPE tokenizer + LlamaForCausalLM) from a text corpus"};
  std::string corpus_path, out_dir, source = "unnamed";
  int validation_every = 20;
  size_t vocab_size = 4096;
  medq::train::ModelShape shape;
  medq::train::TrainOptions o;
  app.add_option("--corpus", corpus_path, "UTF-8 text, documents separated by blank lines")
      ->required();
  app.add_option("--out", out_dir, "The model directory to write")->required();
  app.add_option("--source", source, "Where the corpus came from (recorded in training.json)");
  app.add_option("--validation-every", validation_every,
                 "Hold out every Nth document for validation");
  app.add_option("--vocab", vocab_size, "Vocabulary size, special token included");
  app.add_option("--hidden", shape.hidden, "Hidden size");
  app.add_option("--layers", shape.layers, "Decoder layers");
  app.add_option("--heads", shape.heads, "Attention heads");
  app.add_option("--kv-heads", shape.kv_heads, "Key/value heads");
  app.add_option("--intermediate", shape.intermediate, "MLP width");
  app.add_option("--context", shape.context, "Training window and max_position_embeddings");
  app.add_option("--steps", o.steps, "Optimizer steps");
  app.add_option("--batch", o.batch, "Windows per step");
  app.add_option("--warmup", o.warmup_steps, "Linear warm-up steps");
  app.add_option("--lr", o.lr, "Peak learning rate (cosine decay to a tenth)");
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay of the matrices");
  app.add_option("--seed", o.seed, "Seed of the initial weights and the window order");
  app.add_option("--eval-every", o.eval_every, "Steps between validation passes");
  app.add_option("--eval-windows", o.eval_windows, "Validation windows per pass");
  app.add_option("--save-every", o.save_every, "Steps between saves");
  app.add_option("--threads", o.threads, "LibTorch threads (0: one per core)");
  CLI11_PARSE(app, argc, argv);

  auto corpus = medq::train::ReadCorpus(corpus_path, validation_every);
  if (!corpus.ok()) return Fail(corpus.error().message);
  std::fprintf(stderr, "corpus: %zu training and %zu validation documents\n", corpus->train.size(),
               corpus->validation.size());

  const auto t_bpe = std::chrono::steady_clock::now();
  auto bpe = medq::train::TrainByteLevelBpe(corpus->train, vocab_size, {kEndOfText});
  if (!bpe.ok()) return Fail(bpe.error().message);
  const double bpe_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_bpe).count();
  fs::create_directories(out_dir);
  if (!WriteText(fs::path(out_dir) / "tokenizer.json", medq::train::TokenizerJson(*bpe)) ||
      !WriteText(fs::path(out_dir) / "tokenizer_config.json",
                 medq::train::TokenizerConfigJson(*bpe))) {
    return Fail("cannot write the tokenizer into " + out_dir);
  }
  // Encode with the tokenizer as medqd will load it, so training sees exactly
  // the ids that inference produces.
  auto tokenizer = medq::tokenizer::Tokenizer::FromModelDir(out_dir);
  if (!tokenizer.ok()) return Fail(tokenizer.error().message);
  const auto eot = (*tokenizer)->TokenToId(kEndOfText);
  if (!eot) return Fail("the tokenizer lost its end-of-text token");
  const auto train_ids = medq::train::EncodeDocuments(**tokenizer, corpus->train, *eot);
  const auto validation_ids = medq::train::EncodeDocuments(**tokenizer, corpus->validation, *eot);
  std::fprintf(stderr, "tokenizer: %zu tokens in %.1f s; %zu training, %zu validation tokens\n",
               bpe->tokens.size(), bpe_s, train_ids.size(), validation_ids.size());

  shape.vocab = static_cast<int64_t>(bpe->tokens.size());
  shape.eos_id = *eot;
  const json record_base = {
      {"corpus",
       {{"source", source},
        {"fingerprint_fnv1a64", medq::train::FingerprintFile(corpus_path)},
        {"training_documents", corpus->train.size()},
        {"validation_documents", corpus->validation.size()},
        {"training_tokens", train_ids.size()},
        {"validation_tokens", validation_ids.size()}}},
      {"tokenizer",
       {{"type", "byte-level BPE"},
        {"vocab_size", bpe->tokens.size()},
        {"merges", bpe->merges.size()},
        {"train_seconds", bpe_s}}},
      {"model", medq::train::ConfigJson(shape)},
      {"options",
       {{"steps", o.steps},
        {"batch", o.batch},
        {"context", shape.context},
        {"warmup_steps", o.warmup_steps},
        {"lr", o.lr},
        {"min_lr_ratio", o.min_lr_ratio},
        {"weight_decay", o.weight_decay},
        {"clip_norm", o.clip_norm},
        {"seed", o.seed},
        {"threads", o.threads},
        {"optimizer", "AdamW(0.9, 0.95)"}}},
  };
  const auto on_eval = [](const CurvePoint& p) {
    std::fprintf(stderr, "step %lld  train %.4f  validation %.4f (ppl %.1f)  %.0f s\n",
                 static_cast<long long>(p.step), p.train_loss, p.validation_loss,
                 std::exp(p.validation_loss), p.seconds);
  };
  const auto on_save = [&](const TrainReport& r) {
    json record = record_base;
    record["parameters"] = r.parameters;
    record["tokens_seen"] = r.tokens_seen;
    record["train_seconds"] = r.seconds;
    json curve = json::array();
    for (const CurvePoint& p : r.curve) {
      curve.push_back({{"step", p.step},
                       {"train_loss", p.train_loss},
                       {"validation_loss", p.validation_loss},
                       {"seconds", p.seconds}});
    }
    record["curve"] = curve;
    WriteText(fs::path(out_dir) / "training.json", record.dump(2) + "\n");
  };
  auto report =
      medq::train::TrainModel(shape, o, train_ids, validation_ids, out_dir, on_eval, on_save);
  if (!report.ok()) return Fail(report.error().message);
  std::fprintf(stderr, "done: %lld parameters, %lld tokens seen, %.0f s\n",
               static_cast<long long>(report->parameters),
               static_cast<long long>(report->tokens_seen), report->seconds);
  return 0;
}
