// mask_bench: what structured output costs a decode step on the CPU.
//
// A Qwen2.5-0.5B-shaped model with random bf16 weights (bench/engine's) and
// the qwen3 fixture tokenizer (151,669 tokens; the model's 151,936 rows)
// generate the same number of tokens greedily with and without a JSON
// Schema constraint, alternating, `--reps` times each; the grammar's own
// time per step (FillAllowed, the matcher's Accept and the masking of the
// logits row) is measured apart over a random walk of the same schemas.
// Prints one JSON object: decode ms per token with and without, the
// overhead, the mask's own ms per step, medians and ranges.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/engine/random_model.h"
#include "daemon/engine/engine.h"
#include "daemon/grammar/structured_output.h"
#include "daemon/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// Schemas whose documents run long enough to measure: a note of free text,
// a list of records, enums and numbers.
const char* const kSchemas[] = {
    R"({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]})",
    R"({"type": "array", "items": {"type": "object", "properties": {
        "drug": {"type": "string", "maxLength": 20},
        "mg": {"type": "integer", "minimum": 0, "maximum": 5000},
        "route": {"enum": ["oral", "iv", "im", "topical"]}},
        "required": ["drug", "mg", "route"], "additionalProperties": false}})",
};

struct Stats {
  double median = 0, min = 0, max = 0;
};

Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

json ToJson(const Stats& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

medq::ResponseFormat Format(const char* schema) {
  medq::ResponseFormat f;
  f.type = medq::ResponseFormat::Type::kJsonSchema;
  f.schema = nlohmann::ordered_json::parse(schema);
  return f;
}

// Decode ms per token of one greedy run (the prefill excluded).
double DecodeMsPerToken(const medq::engine::Model& model, int tokens,
                        std::shared_ptr<medq::engine::TokenConstraint> constraint) {
  medq::engine::GenerateRequest r;
  r.prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  r.max_new_tokens = tokens;
  r.stop_ids = std::vector<int32_t>{-1};  // never: every run decodes `tokens`
  r.constraint = std::move(constraint);
  auto result = medq::engine::Generate(model, r, [](int32_t) { return true; });
  if (!result.ok()) throw std::runtime_error(result.error().message);
  return result->decode_ms / std::max(1, result->new_tokens - 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mask_bench: structured output's cost per decode step (prints JSON)"};
  std::string tokenizer_dir = std::string(MEDQ_SHARED_DIR_DEFAULT) + "/fixtures/tokenizers/qwen3";
  int tokens = 64, reps = 5, threads = 2;
  app.add_option("--tokenizer", tokenizer_dir, "A tokenizer folder (tokenizer.json)");
  app.add_option("--tokens", tokens, "Tokens per run");
  app.add_option("--reps", reps, "Runs with and without the constraint, alternating");
  app.add_option("--threads", threads, "CPU threads");
  CLI11_PARSE(app, argc, argv);

  auto tok = medq::tokenizer::Tokenizer::FromModelDir(tokenizer_dir);
  if (!tok.ok()) {
    std::cerr << tok.error().message << "\n";
    return 1;
  }
  medq::bench::ModelShape shape;
  for (const auto& s : medq::bench::BenchShapes())
    if (s.name == "Qwen2.5-0.5B") shape = s;
  const fs::path dir = fs::temp_directory_path() / "medq-mask-bench-model";
  if (!fs::exists(dir / "model.safetensors")) {
    if (auto st = medq::bench::WriteRandomModel(shape, dir); !st.ok()) {
      std::cerr << st.error().message << "\n";
      return 1;
    }
  }
  medq::engine::InitWorkerThread(threads);
  auto loaded = medq::engine::LoadModel(dir, medq::engine::LoadOptions{"cpu", "bf16"});
  if (!loaded.ok()) {
    std::cerr << loaded.error().message << "\n";
    return 1;
  }
  const auto& model = **loaded;
  const int64_t vocab = shape.vocab;
  const int32_t eos = *(*tok)->EosId();
  auto so = medq::grammar::StructuredOutput::Create(**tok, vocab, {eos});
  if (!so.ok()) {
    std::cerr << so.error().message << "\n";
    return 1;
  }

  json out = {{"bench", "mask_bench"}, {"model", shape.name + " (random bf16)"},
              {"vocab", vocab},        {"tokenizer", fs::path(tokenizer_dir).filename().string()},
              {"threads", threads},    {"tokens", tokens},
              {"reps", reps}};
  // The first compile of each schema, then a cached one.
  json compile = json::array();
  for (const char* schema : kSchemas) {
    const auto t0 = Clock::now();
    auto c = (*so)->Constrain(Format(schema));
    const double first = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const auto t1 = Clock::now();
    auto again = (*so)->Constrain(Format(schema));
    const double cached = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
    if (!c.ok() || !again.ok()) return 1;
    compile.push_back({{"first_ms", first}, {"cached_ms", cached}});
  }
  out["compile"] = compile;

  (void)DecodeMsPerToken(model, 8, nullptr);  // warm-up
  json per_schema = json::array();
  for (const char* schema : kSchemas) {
    std::vector<double> plain, constrained;
    for (int i = 0; i < reps; ++i) {
      const bool constrained_first = i % 2 == 1;
      for (int k = 0; k < 2; ++k) {
        if ((k == 0) == constrained_first) {
          constrained.push_back(DecodeMsPerToken(model, tokens, *(*so)->Constrain(Format(schema))));
        } else {
          plain.push_back(DecodeMsPerToken(model, tokens, nullptr));
        }
      }
    }
    std::vector<double> overhead;
    for (int i = 0; i < reps; ++i)
      overhead.push_back(100.0 * (constrained[i] - plain[i]) / plain[i]);

    // The grammar's own time per step: fill, mask a logits row, accept.
    std::vector<double> mask_ms;
    std::mt19937_64 rng(1);
    auto constraint = *(*so)->Constrain(Format(schema));
    std::vector<int32_t> words;
    std::vector<float> row(static_cast<size_t>(vocab), 0.5f);
    for (int step = 0; step < tokens; ++step) {
      // Timed: what the engine adds to a step on the CPU (token_mask.cc):
      // the allowed set, and -inf over the rest of a logits row.
      const auto t0 = Clock::now();
      words.assign(static_cast<size_t>((vocab + 31) / 32), 0);
      constraint->FillAllowed(words);
      for (int64_t id = 0; id < vocab; ++id) {
        const auto word = static_cast<uint32_t>(words[static_cast<size_t>(id / 32)]);
        if (((word >> (id % 32)) & 1u) == 0) row[static_cast<size_t>(id)] = -1e30f;
      }
      const double fill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      // Not timed: a random allowed token (a model's draw), then Accept.
      int32_t pick = -1;
      int64_t seen = 0;
      for (int64_t id = 0; id < vocab; ++id) {
        if (row[static_cast<size_t>(id)] > -1e29f && rng() % static_cast<uint64_t>(++seen) == 0) {
          pick = static_cast<int32_t>(id);
        }
        row[static_cast<size_t>(id)] = 0.5f;
      }
      if (pick < 0 || pick == eos) break;
      const auto t1 = Clock::now();
      constraint->Accept(pick);
      mask_ms.push_back(fill_ms +
                        std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
    }
    const Stats p = Summarize(plain), c = Summarize(constrained);
    per_schema.push_back({{"decode_ms_per_token", ToJson(p)},
                          {"constrained_ms_per_token", ToJson(c)},
                          {"overhead_percent", ToJson(Summarize(overhead))},
                          {"mask_ms_per_step", ToJson(Summarize(mask_ms))},
                          {"mask_percent_of_step", 100.0 * Summarize(mask_ms).median / p.median}});
  }
  out["schemas"] = per_schema;
  std::cout << out.dump(2) << "\n";
  return 0;
}
