// medq-run: runs a model directory directly, without the daemon.
//   medq-run MODEL_DIR (--ids 1,2,3 | --prompt TEXT) [--max-tokens N] [--device cpu]
//            [--dtype auto] [--adapter DIR] [--quantize none|int8|int4]
//            [--quantize-group G] [--quantize-embeddings] [--temperature T]
//            [--top-k K] [--top-p P] [--min-p P] [--repetition-penalty R]
//            [--seed N] [--threads N]
// Prints the generated ids on one line (with --prompt: the prompt and the
// generated text, through the model's tokenizer.json, as is: no chat
// template), then the timings on stderr.
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "daemon/engine/blas_threads.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/host_pool.h"
#include "daemon/tokenizer/tokenizer.h"

namespace {

struct Options {
  std::string model_dir;
  std::string ids;
  std::string prompt;  // instead of ids: encoded with the model's tokenizer
  int max_tokens = 32;
  std::string device = "cpu";
  std::string dtype = "auto";
  std::string adapter;
  std::string quantize = "none";
  int64_t quantize_group = 64;
  bool quantize_embeddings = false;
  medq::engine::SamplingParams sampling;
  int64_t seed = -1;
  int threads = 0;
};

bool ParseIds(const std::string& text, std::vector<int32_t>* out) {
  std::stringstream s(text);
  std::string item;
  while (std::getline(s, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) return false;
      out->push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return false;
    }
  }
  return !out->empty();
}

const char* FinishName(medq::engine::FinishReason f) {
  switch (f) {
    case medq::engine::FinishReason::kStop:
      return "stop";
    case medq::engine::FinishReason::kLength:
      return "length";
    case medq::engine::FinishReason::kCancelled:
      return "cancelled";
  }
  return "?";
}

int Fail(const medq::Error& e) {
  std::fprintf(stderr, "medq-run: %s: %s\n", std::string(medq::ErrorCodeName(e.code)).c_str(),
               e.message.c_str());
  return medq::ExitStatusFor(e.code);
}

int Run(const Options& o) {
  using Clock = std::chrono::steady_clock;
  medq::engine::InitWorkerThread(o.threads);
  medq::engine::GenerateRequest request;
  std::unique_ptr<medq::tokenizer::Tokenizer> tokenizer;
  if (!o.prompt.empty()) {
    auto loaded = medq::tokenizer::Tokenizer::FromModelDir(o.model_dir);
    if (!loaded.ok()) return Fail(loaded.error());
    tokenizer = std::move(loaded).value();
    request.prompt = tokenizer->Encode(o.prompt);
  } else if (!ParseIds(o.ids, &request.prompt)) {
    std::fprintf(stderr, "medq-run: --ids must be a comma-separated list of token ids\n");
    return medq::kExitUsage;
  }
  request.max_new_tokens = o.max_tokens;
  request.sampling = o.sampling;
  if (o.seed >= 0) request.sampling.seed = static_cast<uint64_t>(o.seed);

  const auto t0 = Clock::now();
  // With an adapter the base loads in full precision and the merged model is
  // quantized, as the daemon does.
  medq::engine::LoadOptions load{o.device, o.dtype};
  if (o.adapter.empty()) {
    load.quantize = o.quantize;
    load.quantize_group = o.quantize_group;
    load.quantize_embeddings = o.quantize_embeddings;
  }
  auto model = medq::engine::LoadModel(o.model_dir, load);
  if (!model.ok()) return Fail(model.error());
  if (!o.adapter.empty()) {
    auto adapted = medq::engine::ApplyAdapter(*model, o.adapter, o.quantize, o.quantize_group,
                                              o.quantize_embeddings);
    if (!adapted.ok()) return Fail(adapted.error());
    model = std::move(adapted);
  }
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const auto& info = medq::engine::Info(**model);

  std::vector<int32_t> out;
  auto result = medq::engine::Generate(**model, request, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  if (!result.ok()) return Fail(result.error());
  if (tokenizer) {
    std::printf("%s%s\n", o.prompt.c_str(), tokenizer->Decode(out, true).c_str());
  } else {
    for (size_t i = 0; i < out.size(); ++i)
      std::printf("%s%d", i ? "," : "", out[i]);
    std::printf("\n");
  }
  const double decode_tps =
      result->new_tokens > 1 ? (result->new_tokens - 1) / (result->decode_ms / 1000.0) : 0.0;
  std::fprintf(stderr,
               "model %s (%s, %s, %s, quantization %s, %.1f MB)\nload %.1f ms | prompt %d tokens, "
               "prefill %.1f ms "
               "(%.1f tok/s) | %d new tokens, decode %.1f ms (%.2f tok/s) | finish %s\n",
               o.model_dir.c_str(), info.architecture.c_str(), info.device.c_str(),
               info.dtype.c_str(), info.quantization.c_str(), info.parameter_bytes / 1e6, load_ms,
               result->prompt_tokens, result->prefill_ms,
               result->prompt_tokens / (result->prefill_ms / 1000.0), result->new_tokens,
               result->decode_ms, decode_tps, FinishName(result->finish));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: as medqd does
  medq::engine::UsePooledHostMemory();
  Options o;
  CLI::App app{"Run a Hugging Face model directory with the medq engine (no daemon)"};
  app.add_option("model_dir", o.model_dir, "Model directory (config.json + safetensors)")
      ->required();
  auto* ids = app.add_option("--ids", o.ids, "Prompt token ids, comma-separated");
  auto* prompt = app.add_option("--prompt", o.prompt, "Prompt text, through the model's tokenizer");
  ids->excludes(prompt);
  app.callback([&] {
    if (ids->count() + prompt->count() == 0) throw CLI::RequiredError("--ids or --prompt");
  });
  app.add_option("--max-tokens", o.max_tokens, "Maximum new tokens")->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", o.dtype, "auto, bf16, fp16 or fp32")->capture_default_str();
  app.add_option("--adapter", o.adapter, "PEFT LoRA adapter directory to merge");
  app.add_option("--quantize", o.quantize,
                 "Weight quantization of the projections: none, int8 or int4")
      ->capture_default_str();
  app.add_option("--quantize-group", o.quantize_group, "int4's group size: 32, 64 or 128")
      ->capture_default_str();
  app.add_flag("--quantize-embeddings", o.quantize_embeddings,
               "With int8 or int4: lm_head and the input embeddings too");
  app.add_option("--temperature", o.sampling.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "0 = off");
  app.add_option("--top-p", o.sampling.top_p, "1 = off");
  app.add_option("--min-p", o.sampling.min_p, "0 = off");
  app.add_option("--repetition-penalty", o.sampling.repetition_penalty, "1 = off");
  app.add_option("--seed", o.seed, "Seed for reproducible sampling");
  app.add_option("--threads", o.threads, "Intra-op threads (0 = LibTorch default)");
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
