// perplexity_bench: what quantization costs in quality (issue 44). The
// perplexity of a model (by default the demo model, models/medq-demo) on the
// held-out documents of its corpus, with the weights as loaded (bf16) and
// with the projections quantized (int8, int4 in groups of 32, 64, 128), each
// against the first configuration. Prints one JSON document.
//
// The held-out text: the corpus split as the demo model's trainer splits it
// (tools/medq-train's ReadCorpus: every `--validation-every`-th document, the
// 0th first), the documents joined by "\n" (no final newline, which
// llama.cpp's -f would drop; `--write-text` writes it, for llama-perplexity
// and transformers).
//
// The protocol is llama-perplexity's (tools/perplexity, without
// --ppl-stride), so that the figures of both programs compare: the text is
// tokenized whole by the model's own tokenizer without special tokens (with
// --bos, the BOS token first: llama.cpp's add_bos_token; the demo model's
// GGUF has none, as its tokenizer adds no special tokens); it is cut into
// floor(tokens / context) non-overlapping chunks of `context` tokens (the
// rest is dropped), each run at positions 0 .. context - 1 (with --bos, its
// first token replaced by BOS); the scored tokens are those at positions
// context / 2 + 1 .. context - 1 of each chunk (context / 2 - 1 of them),
// each by the log-softmax (in double, from the float32 logits) of the logits
// at the position before it. Perplexity is exp of the mean negative
// log-likelihood over every scored token; the uncertainty is llama.cpp's:
// the standard error of that mean times the perplexity.
//
// `--step-rows N` reads each chunk N tokens at a time through its KV cache
// instead of in one pass, as generation reads a prompt in chunks. With int8
// and int4 weights each row's products are the same either way (the integer
// products, x rounded to int8 blocks: dense_kernels.h); attention and the
// bf16 products of 32 rows and more (tiles and GEMM) may round otherwise.
#include <c10/core/InferenceMode.h>

#include <ATen/ATen.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "daemon/engine/engine.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"
#include "daemon/engine/transformer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tools/medq-train/corpus.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Options {
  std::string model = "models/medq-demo";
  std::string corpus;
  int validation_every = 20;
  int context = 0;    // 0: the model's max_position_embeddings
  int step_rows = 0;  // 0: each chunk in one pass
  std::vector<std::string> quantize = {"none", "int8", "int4"};
  std::vector<int64_t> groups = {64};
  std::string dtype = "bf16";
  int threads = 2;
  bool bos = false;
  std::string write_text, write_ids;
};

// One configuration's load options and name: "none", "int8", "int4-g64".
struct Config {
  std::string name;
  medq::engine::LoadOptions load;
};

std::vector<Config> Configs(const Options& o) {
  std::vector<Config> out;
  for (const std::string& q : o.quantize) {
    if (q != "int4") {
      medq::engine::LoadOptions load{"cpu", o.dtype};
      load.quantize = q;
      out.push_back({q, load});
      continue;
    }
    for (const int64_t g : o.groups) {
      medq::engine::LoadOptions load{"cpu", o.dtype};
      load.quantize = q;
      load.quantize_group = g;
      out.push_back({"int4-g" + std::to_string(g), load});
    }
  }
  return out;
}

// Sums of the negative log-likelihoods of the scored tokens of every chunk
// (the protocol above) and of their squares.
struct Scores {
  double nll = 0, nll2 = 0;
  int64_t count = 0;
};

Scores Score(const medq::engine::Model& model, const std::vector<int32_t>& tokens, int64_t context,
             std::optional<int32_t> bos, int64_t step_rows) {
  c10::InferenceMode guard;
  Scores s;
  const int64_t chunks = static_cast<int64_t>(tokens.size()) / context;
  const int64_t first = context / 2;
  for (int64_t c = 0; c < chunks; ++c) {
    std::vector<int64_t> ids(tokens.begin() + c * context, tokens.begin() + (c + 1) * context);
    if (bos) ids[0] = *bos;
    medq::engine::KvCache cache(model, 1, context);
    const at::Tensor all = at::tensor(ids, at::kLong).view({1, context});
    const int64_t step = step_rows > 0 ? step_rows : context;
    std::vector<at::Tensor> parts;
    for (int64_t p = 0; p < context; p += step) {
      parts.push_back(medq::engine::Forward(model, all.narrow(1, p, std::min(step, context - p)),
                                            cache, medq::engine::LogitsFor::kAllPositions)[0]);
    }
    const at::Tensor logits = at::cat(parts, 0);
    // Positions first .. context - 2 predict the tokens after them.
    const at::Tensor logp =
        at::log_softmax(logits.narrow(0, first, context - 1 - first).to(at::kDouble), -1);
    const at::Tensor target =
        at::tensor(std::vector<int64_t>(ids.begin() + first + 1, ids.end()), at::kLong);
    const at::Tensor nll = -logp.gather(1, target.view({-1, 1})).view(-1);
    s.nll += nll.sum().item<double>();
    s.nll2 += (nll * nll).sum().item<double>();
    s.count += nll.numel();
  }
  return s;
}

json Measure(const fs::path& dir, const Config& config, const std::vector<int32_t>& tokens,
             int64_t context, bool bos, int64_t step_rows) {
  auto model = medq::engine::LoadModel(dir, config.load);
  if (!model.ok()) return {{"config", config.name}, {"error", model.error().message}};
  const auto& info = medq::engine::Info(**model);
  const Scores s =
      Score(**model, tokens, context, bos ? info.bos_id : std::optional<int32_t>(), step_rows);
  const double mean = s.nll / static_cast<double>(s.count);
  const double var = s.nll2 / static_cast<double>(s.count) - mean * mean;
  const double ppl = std::exp(mean);
  return {{"config", config.name},
          {"dtype", info.dtype},
          {"quantization", info.quantization},
          {"group", config.load.quantize == "int4" ? json(config.load.quantize_group) : json()},
          {"parameter_bytes", info.parameter_bytes},
          {"mean_nll", mean},
          {"perplexity", ppl},
          {"perplexity_stderr", std::sqrt(std::max(0.0, var) / (s.count - 1)) * ppl},
          {"scored_tokens", s.count}};
}

int Run(const Options& o) {
  medq::engine::InitWorkerThread(o.threads);
  const fs::path dir = o.model;
  auto corpus = medq::train::ReadCorpus(o.corpus, o.validation_every);
  if (!corpus.ok()) {
    std::fprintf(stderr, "perplexity_bench: %s\n", corpus.error().message.c_str());
    return 1;
  }
  auto tokenizer = medq::tokenizer::Tokenizer::FromModelDir(dir);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "perplexity_bench: %s\n", tokenizer.error().message.c_str());
    return 1;
  }
  std::string text;
  for (const std::string& doc : corpus->validation)
    text += (text.empty() ? "" : "\n") + doc;
  std::vector<int32_t> tokens = (*tokenizer)->Encode(text, /*add_special_tokens=*/false);
  if (!o.write_text.empty()) std::ofstream(o.write_text, std::ios::binary) << text;
  if (!o.write_ids.empty()) {
    std::ofstream out(o.write_ids);
    for (const int32_t id : tokens)
      out << id << "\n";
  }

  auto probe = medq::engine::LoadModel(dir, {"cpu", o.dtype});
  if (!probe.ok()) {
    std::fprintf(stderr, "perplexity_bench: %s\n", probe.error().message.c_str());
    return 1;
  }
  const auto& probe_info = medq::engine::Info(**probe);
  const int64_t context = o.context > 0 ? o.context : probe_info.max_context;
  if (o.bos) {
    if (!probe_info.bos_id) {
      std::fprintf(stderr, "perplexity_bench: --bos, but the model has no BOS token\n");
      return 1;
    }
    tokens.insert(tokens.begin(), *probe_info.bos_id);
  }
  probe->reset();
  const int64_t chunks = static_cast<int64_t>(tokens.size()) / context;
  if (chunks < 1 || context < 4) {
    std::fprintf(stderr, "perplexity_bench: %zu tokens do not fill one chunk of %lld\n",
                 tokens.size(), static_cast<long long>(context));
    return 1;
  }

  json results = json::array();
  for (const Config& c : Configs(o))
    results.push_back(Measure(dir, c, tokens, context, o.bos, o.step_rows));
  // Each configuration's perplexity against the first's, in percent.
  const json& base = results.front();
  for (json& r : results) {
    if (r.contains("perplexity") && base.contains("perplexity")) {
      r["increase_percent"] =
          100 * (r["perplexity"].get<double>() / base["perplexity"].get<double>() - 1);
    }
  }
  json doc = {{"model", dir.filename().string()},
              {"corpus",
               {{"fingerprint_fnv1a64", medq::train::FingerprintFile(o.corpus)},
                {"documents", corpus->train.size() + corpus->validation.size()},
                {"validation_every", o.validation_every},
                {"validation_documents", corpus->validation.size()},
                {"validation_tokens_as_trained",
                 medq::train::EncodeDocuments(**tokenizer, corpus->validation, 0).size()},
                {"text_bytes", text.size()}}},
              {"protocol",
               {{"name", "llama-perplexity"},
                {"tokens", tokens.size()},
                {"context", context},
                {"chunks", chunks},
                {"bos", o.bos},
                {"scored_per_chunk", context - context / 2 - 1}}},
              {"threads", o.threads},
              {"results", results}};
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Perplexity of a model on its corpus's held-out documents, quantized or not"};
  app.add_option("--corpus", o.corpus, "The corpus (scripts/kjv-corpus writes the demo model's)")
      ->required();
  app.add_option("--model", o.model, "Model directory");
  app.add_option("--validation-every", o.validation_every,
                 "Every n-th document is held out (the trainer's split)");
  app.add_option("--context", o.context, "Chunk length in tokens (default: the model's context)");
  app.add_option("--quantize", o.quantize, "Configurations: none, int8, int4")->delimiter(',');
  app.add_option("--groups", o.groups, "int4 group sizes: 32, 64, 128")->delimiter(',');
  app.add_option("--dtype", o.dtype, "Weight dtype as loaded: bf16, fp32");
  app.add_option("--threads", o.threads, "Engine threads");
  app.add_option("--step-rows", o.step_rows,
                 "Read each chunk this many tokens at a time (as in chunked prefill)");
  app.add_flag("--bos", o.bos, "BOS first, and first in every chunk (llama.cpp's add_bos_token)");
  app.add_option("--write-text", o.write_text, "Write the held-out text here");
  app.add_option("--write-ids", o.write_ids, "Write its token ids here, one a line");
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
