// embed_bench: end-to-end embedding throughput of the engine, texts per
// second (tokenize + Embed), for a sentence-transformers folder
// (all-MiniLM-L6-v2 by default) at batch sizes 1, 8 and 32 on two corpora:
// short sentences and texts of exactly 128 tokens (corpus.h).
//
// Each corpus is embedded whole, in batches of B taken in the order
// sentence-transformers' encode() takes them (longest text first, by
// characters), so that the peer (st_peer.py) pads the same batches. One
// untimed warm-up of two batches, then --repeats measurements, each of whole
// passes over the corpus until --min-seconds have passed. One JSON object on
// stdout; --print-corpus prints the corpora instead, for the peer to read.
//
// Threads: the engine's InitWorkerThread(--threads); LibTorch's intra-op pool
// then has one thread and GEMM runs on BLAS's own threads, which are capped
// to --threads too when the BLAS is OpenBLAS (the daemon leaves them at one
// per core).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/embeddings/corpus.h"
#include "bench/kernels/timing.h"
#include "daemon/engine/blas_threads.h"
#include "daemon/engine/embedding.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/runtime.h"
#include "daemon/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string model = MEDQ_SOURCE_DIR "/.cache/models/all-MiniLM-L6-v2";
  int threads = 0;
  std::vector<int> batch_sizes = {1, 8, 32};
  std::vector<std::string> corpora = {"short", "tok128"};
  int texts = 128;
  int repeats = 3;
  double min_seconds = 1.0;
  std::string device = "cpu";
  std::string dtype = "auto";
  bool print_corpus = false;
};

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "embed_bench: " << what << std::endl;
  std::exit(1);
}

// OpenBLAS's thread count, when the BLAS LibTorch uses is OpenBLAS; -1
// otherwise (MKL inside PyPI's LibTorch follows at::set_num_threads).
int BlasThreads() {
  using Get = int (*)();
  if (void* f = dlsym(RTLD_DEFAULT, "openblas_get_num_threads")) {
    return reinterpret_cast<Get>(f)();
  }
  return -1;
}

void CapBlasThreads(int threads) {
  using Set = void (*)(int);
  if (void* f = dlsym(RTLD_DEFAULT, "openblas_set_num_threads")) {
    if (BlasThreads() > threads) reinterpret_cast<Set>(f)(threads);
  }
}

// Indices in encode()'s order: longest text (in characters) first, ties in
// corpus order.
std::vector<size_t> EncodeOrder(const std::vector<std::string>& texts) {
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return texts[a].size() > texts[b].size(); });
  return order;
}

json CorpusJson(const medq::bench::EmbedCorpus& c) {
  return {{"texts", c.texts}, {"tokens", c.tokens}};
}

json TokenStats(const std::vector<int>& tokens) {
  const double sum = std::accumulate(tokens.begin(), tokens.end(), 0.0);
  return {{"mean", sum / static_cast<double>(tokens.size())},
          {"min", *std::min_element(tokens.begin(), tokens.end())},
          {"max", *std::max_element(tokens.begin(), tokens.end())}};
}

struct Bench {
  const medq::engine::EmbeddingModel& model;
  const medq::tokenizer::Tokenizer& tok;
  const medq::engine::EmbeddingInfo& info;

  // Tokenizes and embeds texts[order[begin .. end)] in batches of `batch`.
  void Run(const std::vector<std::string>& texts, const std::vector<size_t>& order, size_t end,
           int batch) const {
    std::vector<std::vector<int32_t>> ids;
    for (size_t start = 0; start < end; start += static_cast<size_t>(batch)) {
      ids.clear();
      const size_t stop = std::min(end, start + static_cast<size_t>(batch));
      for (size_t i = start; i < stop; ++i)
        ids.push_back(medq::bench::TokenizeForEmbedding(tok, info, texts[order[i]]));
      auto out = medq::engine::Embed(model, ids);
      if (!out.ok()) Die(out.error().message);
      if (out->size() != ids.size()) Die("Embed returned the wrong number of vectors");
    }
  }

  json Measure(const medq::bench::EmbedCorpus& corpus, int batch, const Options& o) const {
    const std::vector<size_t> order = EncodeOrder(corpus.texts);
    const size_t n = corpus.texts.size();
    Run(corpus.texts, order, std::min(n, 2 * static_cast<size_t>(batch)), batch);  // warm-up
    std::vector<double> rates;
    for (int r = 0; r < o.repeats; ++r) {
      const auto t0 = Clock::now();
      int passes = 0;
      double elapsed = 0;
      do {
        Run(corpus.texts, order, n, batch);
        ++passes;
        elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      } while (elapsed < o.min_seconds);
      rates.push_back(static_cast<double>(passes) * static_cast<double>(n) / elapsed);
    }
    // Tokenizing alone, for the share of the end-to-end time it takes.
    double tokenize_s = 1e30;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = Clock::now();
      size_t total = 0;
      for (const std::string& text : corpus.texts)
        total += medq::bench::TokenizeForEmbedding(tok, info, text).size();
      if (total == 0) Die("empty corpus");
      tokenize_s = std::min(tokenize_s, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return {{"corpus", corpus.name},
            {"batch", batch},
            {"texts_s", medq::bench::Summary(rates)},
            {"tokenize_ms_per_text", tokenize_s * 1000.0 / static_cast<double>(n)}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: as medqd does
  Options o;
  CLI::App app{"embed_bench: texts/s of tokenize + Embed for a sentence-transformers folder"};
  app.add_option("--model", o.model, "sentence-transformers folder")->capture_default_str();
  app.add_option("--threads", o.threads, "Engine (and OpenBLAS) threads; 0: one per core")
      ->capture_default_str();
  app.add_option("--batch-sizes", o.batch_sizes, "Batch sizes")->capture_default_str();
  app.add_option("--corpora", o.corpora, "short, tok128 (texts of 128 tokens), tokN")
      ->capture_default_str();
  app.add_option("--texts", o.texts, "Texts per corpus")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "Measurements per cell")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--min-seconds", o.min_seconds, "Each measurement runs whole passes this long")
      ->capture_default_str();
  app.add_option("--device", o.device, "cpu, cuda, cuda:N")->capture_default_str();
  app.add_option("--dtype", o.dtype, "auto, fp32, bf16, fp16")->capture_default_str();
  app.add_flag("--print-corpus", o.print_corpus, "Print the corpora as JSON and exit");
  CLI11_PARSE(app, argc, argv);

  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  medq::engine::InitWorkerThread(threads);
  CapBlasThreads(threads);

  const auto t0 = Clock::now();
  auto model = medq::engine::LoadEmbeddingModel(o.model, {o.device, o.dtype});
  if (!model.ok()) Die(model.error().message);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  const medq::engine::EmbeddingInfo& info = medq::engine::Info(**model);
  auto tok = medq::tokenizer::Tokenizer::FromModelDir(info.tokenizer_dir);
  if (!tok.ok()) Die(tok.error().message);

  std::vector<medq::bench::EmbedCorpus> corpora;
  for (const std::string& name : o.corpora) {
    if (name == "short") {
      corpora.push_back(medq::bench::ShortCorpus(**tok, info, o.texts));
    } else if (name.rfind("tok", 0) == 0 && name.size() > 3 &&
               name.find_first_not_of("0123456789", 3) == std::string::npos) {
      auto c = medq::bench::FixedLengthCorpus(**tok, info, o.texts, std::stoi(name.substr(3)));
      if (!c.ok()) Die(c.error().message);
      corpora.push_back(std::move(c).value());
    } else {
      Die("unknown corpus '" + name + "' (short, tok128, tokN)");
    }
  }
  if (o.print_corpus) {
    json out = json::object();
    for (const auto& c : corpora)
      out[c.name] = CorpusJson(c);
    std::cout << out.dump() << "\n";
    return 0;
  }

  const Bench bench{**model, **tok, info};
  json results = json::array();
  for (const auto& c : corpora) {
    for (const int batch : o.batch_sizes)
      results.push_back(bench.Measure(c, batch, o));
  }
  json corpus_info = json::object();
  for (const auto& c : corpora)
    corpus_info[c.name] = {{"texts", c.texts.size()}, {"tokens_per_text", TokenStats(c.tokens)}};
  const json out = {{"benchmark", "embeddings"},
                    {"impl", "medq"},
                    {"libtorch", medq::engine::TorchVersion()},
                    {"model", fs::path(o.model).filename().string()},
                    {"device", info.device},
                    {"dtype", info.dtype},
                    {"threads", threads},
                    {"blas_threads", BlasThreads()},
                    {"load_ms", load_ms},
                    {"repeats", o.repeats},
                    {"min_seconds", o.min_seconds},
                    {"corpora", corpus_info},
                    {"results", results}};
  std::cout << out.dump(2) << "\n";
  return 0;
}
