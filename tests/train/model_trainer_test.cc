#include "tools/medq-train/model_trainer.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "daemon/engine/engine.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/transformer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/support/daemon_process.h"
#include "tests/support/fixtures.h"
#include "tools/medq-train/bpe_trainer.h"
#include "tools/medq-train/corpus.h"

namespace medq::train {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const engine::Model> MustLoad(const fs::path& dir) {
  auto m = engine::LoadModel(dir, {"cpu", "fp32"});
  REQUIRE(m.ok());
  return *m;
}

// A corpus small enough to learn by heart in a few dozen steps.
std::vector<std::string> Rhymes() {
  const std::string cat = "the cat sat on the mat and the dog lay on the log.";
  const std::string count = "one two three four five six seven eight nine ten.";
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) {
    docs.push_back(cat);
    docs.push_back(count);
  }
  return docs;
}

struct Trained {
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  TrainReport report;
};

Trained TrainRhymes(const fs::path& out, uint64_t seed) {
  auto bpe = TrainByteLevelBpe(Rhymes(), 300, {"<|endoftext|>"});
  REQUIRE(bpe.ok());
  auto t = tokenizer::Tokenizer::FromJson(TokenizerJson(*bpe), TokenizerConfigJson(*bpe));
  REQUIRE(t.ok());
  const std::vector<int32_t> ids = EncodeDocuments(**t, Rhymes(), 0);
  ModelShape shape;
  shape.vocab = static_cast<int64_t>(bpe->tokens.size());
  shape.hidden = 32;
  shape.layers = 2;
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.intermediate = 64;
  shape.context = 24;
  TrainOptions o;
  o.steps = 80;
  o.batch = 8;
  o.warmup_steps = 5;
  o.lr = 1e-2;
  o.eval_every = 40;
  o.eval_windows = 8;
  o.save_every = 40;
  o.seed = seed;
  o.threads = 1;
  std::vector<CurvePoint> seen;
  int saves = 0;
  auto report = TrainModel(
      shape, o, ids, ids, out, [&](const CurvePoint& p) { seen.push_back(p); },
      [&](const TrainReport&) { ++saves; });
  REQUIRE(report.ok());
  CHECK(saves == 2);
  CHECK(seen.size() == report->curve.size());
  return {std::move(t).value(), *report};
}

}  // namespace

TEST_CASE("ForwardSequence gives the cached forward pass's logits", "[train]") {
  for (const char* name : {"tiny-llama", "tiny-qwen2"}) {
    const auto m = MustLoad(medq::test::ModelFixture(name));
    const at::Tensor ids = at::arange(3, 19, at::kLong).view({2, 8});
    at::Tensor cached, sequence, with_grad;
    {
      c10::InferenceMode guard;
      engine::KvCache cache(*m, 2, 8);
      cached = engine::Forward(*m, ids, cache, engine::LogitsFor::kAllPositions).clone();
      sequence = engine::ForwardSequence(*m, ids).clone();
    }
    with_grad = engine::ForwardSequence(*m, ids).detach();  // grad mode: out-of-place path
    INFO(name);
    CHECK(at::allclose(sequence, cached, 1e-5, 1e-5));
    CHECK(at::allclose(with_grad, cached, 1e-5, 1e-5));
  }
}

TEST_CASE("training learns a small corpus and saves a model the engine runs", "[train]") {
  medq::test::TempDir tmp;
  const Trained t = TrainRhymes(tmp.path() / "model", 7);
  REQUIRE(t.report.curve.size() == 2);
  CHECK(t.report.parameters > 0);
  CHECK(t.report.tokens_seen == 80 * 8 * 24);
  // From ln(300) ~ 5.7 nats at the start to nearly memorised.
  CHECK(t.report.curve.back().validation_loss < 1.0);
  CHECK(t.report.curve.back().train_loss < t.report.curve.front().train_loss);

  const auto m = MustLoad(tmp.path() / "model");
  const engine::ModelInfo& info = engine::Info(*m);
  CHECK(info.architecture == "LlamaForCausalLM");
  CHECK(info.eos_ids == std::vector<int32_t>{0});
  CHECK(info.max_context == 24);
  // The saved (bf16) model continues the text it learned, greedily.
  engine::GenerateRequest r;
  r.prompt = t.tokenizer->Encode("the cat sat on", false);
  r.max_new_tokens = static_cast<int>(t.tokenizer->Encode(" the mat and the dog", false).size());
  std::vector<int32_t> out;
  auto res = engine::Generate(*m, r, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  REQUIRE(res.ok());
  CHECK(t.tokenizer->Decode(out) == " the mat and the dog");
}

TEST_CASE("training is reproducible from its seed", "[train]") {
  medq::test::TempDir tmp;
  const Trained a = TrainRhymes(tmp.path() / "a", 3);
  const Trained b = TrainRhymes(tmp.path() / "b", 3);
  const Trained c = TrainRhymes(tmp.path() / "c", 4);
  REQUIRE(a.report.curve.size() == b.report.curve.size());
  for (size_t i = 0; i < a.report.curve.size(); ++i) {
    CHECK(a.report.curve[i].train_loss == b.report.curve[i].train_loss);
    CHECK(a.report.curve[i].validation_loss == b.report.curve[i].validation_loss);
  }
  CHECK(a.report.curve.front().train_loss != c.report.curve.front().train_loss);
}

TEST_CASE("training refuses data shorter than one window", "[train]") {
  medq::test::TempDir tmp;
  ModelShape shape;
  shape.vocab = 300;
  shape.context = 64;
  const std::vector<int32_t> few(10, 1);
  auto r = TrainModel(
      shape, TrainOptions{}, few, few, tmp.path(), [](const CurvePoint&) {},
      [](const TrainReport&) {});
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
}

TEST_CASE("the corpus reader splits documents at blank lines", "[train]") {
  medq::test::TempDir tmp;
  const fs::path file = tmp.path() / "corpus.txt";
  std::ofstream(file) << "first line\nsame document\n\n\nsecond\r\n  \nthird\n";
  auto c = ReadCorpus(file, 2);
  REQUIRE(c.ok());
  CHECK(c->validation == std::vector<std::string>{"first line same document", "third"});
  CHECK(c->train == std::vector<std::string>{"second"});
  CHECK(FingerprintFile(file).size() == 16);
  CHECK(!ReadCorpus(tmp.path() / "missing.txt", 2).ok());
}

}  // namespace medq::train
