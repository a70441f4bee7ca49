// tokenizer_bench: load time and single-thread encode/decode throughput of
// each tokenizer folder, over a deterministic ~10 MB mixed corpus. Prints one
// JSON object. Usage: tokenizer_bench [--mb N] [--runs N] [DIR...]
// (default DIRs: every folder of fixtures/tokenizers in the shared folder).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/tokenizer/corpus.h"
#include "daemon/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of this thread: on a shared machine it is steadier than wall time.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<fs::path> DefaultDirs() {
  fs::path shared = MEDQ_SHARED_DIR_DEFAULT;
  if (const char* env = std::getenv("MEDQ_SHARED_DIR"); env != nullptr && *env != '\0') {
    shared = env;
  }
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(shared / "fixtures" / "tokenizers", ec)) {
    if (fs::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

nlohmann::json BenchOne(const fs::path& dir, const std::vector<std::string>& corpus,
                        size_t corpus_bytes, int runs) {
  nlohmann::json r;
  r["tokenizer"] = dir.filename().string();
  std::vector<double> load_s, load_cpu_s;
  std::unique_ptr<medq::tokenizer::Tokenizer> tok;
  for (int i = 0; i < runs; ++i) {
    const double c0 = ThreadCpuSeconds();
    const auto t0 = Clock::now();
    auto loaded = medq::tokenizer::Tokenizer::FromModelDir(dir);
    const auto t1 = Clock::now();
    load_cpu_s.push_back(ThreadCpuSeconds() - c0);
    if (!loaded.ok()) {
      r["error"] = loaded.error().message;
      return r;
    }
    load_s.push_back(Seconds(t0, t1));
    tok = std::move(loaded).value();
  }
  std::vector<double> enc_s, dec_s, enc_cpu_s, dec_cpu_s;
  std::vector<std::vector<int32_t>> ids(corpus.size());
  size_t n_tokens = 0;
  size_t decoded_bytes = 0;
  for (int i = 0; i < runs; ++i) {
    // A fresh tokenizer each run would re-measure loading; the word cache is
    // part of the steady state a daemon sees, so it stays warm between runs.
    const double c0 = ThreadCpuSeconds();
    const auto t0 = Clock::now();
    n_tokens = 0;
    for (size_t d = 0; d < corpus.size(); ++d) {
      ids[d] = tok->Encode(corpus[d], false);
      n_tokens += ids[d].size();
    }
    const auto t1 = Clock::now();
    const double c1 = ThreadCpuSeconds();
    decoded_bytes = 0;
    for (const auto& doc_ids : ids)
      decoded_bytes += tok->Decode(doc_ids).size();
    const auto t2 = Clock::now();
    enc_cpu_s.push_back(c1 - c0);
    dec_cpu_s.push_back(ThreadCpuSeconds() - c1);
    enc_s.push_back(Seconds(t0, t1));
    dec_s.push_back(Seconds(t1, t2));
  }
  const double mb = static_cast<double>(corpus_bytes) / 1e6;
  const double dec_mb = static_cast<double>(decoded_bytes) / 1e6;
  r["load_ms_median"] = Median(load_s) * 1e3;
  r["load_cpu_ms_median"] = Median(load_cpu_s) * 1e3;
  r["encode_mb_per_s_median"] = mb / Median(enc_s);
  r["encode_cpu_mb_per_s_median"] = mb / Median(enc_cpu_s);
  r["encode_first_run_mb_per_s"] = mb / enc_s.front();
  r["decode_mb_per_s_median"] = dec_mb / Median(dec_s);
  r["decode_cpu_mb_per_s_median"] = dec_mb / Median(dec_cpu_s);
  r["tokens"] = n_tokens;
  r["bytes_per_token"] = static_cast<double>(corpus_bytes) / static_cast<double>(n_tokens);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double mb = 10.0;
  int runs = 3;
  std::vector<fs::path> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mb" && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: tokenizer_bench [--mb N] [--runs N] [TOKENIZER_DIR...]\n";
      return 0;
    } else {
      dirs.emplace_back(a);
    }
  }
  if (dirs.empty()) dirs = DefaultDirs();
  if (dirs.empty()) {
    std::cerr << "tokenizer_bench: no tokenizer folders found; pass them as arguments\n";
    return 64;
  }
  const auto corpus = medq::bench::MakeCorpus(static_cast<size_t>(mb * 1e6));
  size_t bytes = 0;
  for (const auto& d : corpus)
    bytes += d.size();
  nlohmann::json out;
  out["corpus_bytes"] = bytes;
  out["corpus_documents"] = corpus.size();
  out["runs"] = runs;
  out["threads"] = 1;
  out["results"] = nlohmann::json::array();
  for (const auto& dir : dirs)
    out["results"].push_back(BenchOne(dir, corpus, bytes, runs));
  std::cout << out.dump(2) << "\n";
  return 0;
}
