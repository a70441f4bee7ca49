// Embedding models against sentence-transformers' encode() (references written
// by tools/embeddings/make_references.py into data/embeddings/): the tiny
// random-weight BERT and MPNet folders in every pooling variant, the real
// all-MiniLM-L6-v2 and all-mpnet-base-v2 when scripts/setup-embedding-models
// installed them, and the folders and batches the loader and Embed refuse.
// CPU, float32.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "daemon/engine/embedding.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

namespace medq::engine::test {
namespace {

namespace fs = std::filesystem;
using medq::test::TempDir;
using nlohmann::json;
using Batch = std::vector<std::vector<int32_t>>;
using Vectors = std::vector<std::vector<float>>;

const fs::path kData = fs::path(MEDQ_ENGINE_TEST_DATA) / "embeddings";

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

void WriteJson(const fs::path& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2);
}

// Copies the committed folder `name` to dir/name and returns the copy.
fs::path CopyFolder(const std::string& name, const fs::path& dir) {
  const fs::path dest = dir / name;
  fs::copy(kData / name, dest, fs::copy_options::recursive);
  return dest;
}

// The variant of a tiny folder make_references.py describes: its Pooling
// config written as given, Normalize kept or dropped, or no modules.json at
// all (a plain transformers folder).
fs::path WriteEmbeddingVariant(const std::string& name, const json& variant, const fs::path& dir) {
  const fs::path dest = CopyFolder(name, dir);
  if (variant.value("plain", false)) {
    fs::remove(dest / "modules.json");
    fs::remove(dest / "sentence_bert_config.json");
    fs::remove_all(dest / "1_Pooling");
    fs::remove_all(dest / "2_Normalize");
    return dest;
  }
  WriteJson(dest / "1_Pooling" / "config.json", variant.at("pooling"));
  if (!variant.at("normalize").get<bool>()) {
    json modules = ReadJson(dest / "modules.json");
    modules.erase(modules.end() - 1);
    WriteJson(dest / "modules.json", modules);
    fs::remove_all(dest / "2_Normalize");
  }
  return dest;
}

std::shared_ptr<const EmbeddingModel> MustLoad(const fs::path& dir) {
  auto model = LoadEmbeddingModel(dir, LoadOptions{});
  INFO((model.ok() ? std::string() : model.error().message));
  REQUIRE(model.ok());
  return *model;
}

Vectors MustEmbed(const EmbeddingModel& model, const Batch& ids) {
  auto out = Embed(model, ids);
  INFO((out.ok() ? std::string() : out.error().message));
  REQUIRE(out.ok());
  return std::move(out).value();
}

double CosineDistance(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  if (aa == 0 && bb == 0) return 0;
  return 1 - ab / std::sqrt(aa * bb);
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

// Checks `got` against `want` element for element (abs tolerance relative to
// the reference's scale) and by cosine distance.
void CheckClose(const Vectors& got, const Vectors& want, double abs_tol, double cos_tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("sequence " << i);
    REQUIRE(got[i].size() == want[i].size());
    double scale = 1;
    for (const float x : want[i])
      scale = std::max(scale, double(std::fabs(x)));
    CHECK(MaxAbsDiff(got[i], want[i]) <= abs_tol * scale);
    CHECK(CosineDistance(got[i], want[i]) <= cos_tol);
  }
}

Batch IdsOf(const json& ref) {
  return ref.at("ids").get<Batch>();
}

Vectors OneAtATime(const EmbeddingModel& model, const Batch& ids) {
  Vectors out;
  for (const auto& seq : ids)
    out.push_back(MustEmbed(model, {seq}).at(0));
  return out;
}

void CheckTinyModel(const std::string& name, const std::string& architecture) {
  const json ref = ReadJson(kData / (name + ".json"));
  const Batch ids = IdsOf(ref);
  const int64_t max_seq = ref.at("max_seq_length").get<int64_t>();
  REQUIRE(ids.size() >= 16);
  // The longest texts were truncated by sentence-transformers; the caller
  // gives the truncated ids.
  CHECK(std::any_of(ids.begin(), ids.end(),
                    [&](const auto& s) { return static_cast<int64_t>(s.size()) == max_seq; }));
  for (const json& variant : ref.at("variants")) {
    const std::string variant_name = variant.at("name").get<std::string>();
    INFO(name << " variant " << variant_name);
    TempDir tmp;
    const auto model = MustLoad(WriteEmbeddingVariant(name, variant, tmp.path()));
    const EmbeddingInfo& info = Info(*model);
    CHECK(info.architecture == architecture);
    CHECK(info.dims == variant.at("dims").get<int64_t>());
    CHECK(info.max_seq_length == max_seq);
    CHECK(info.device == "cpu");
    CHECK(info.dtype == "fp32");
    const bool plain = variant.value("plain", false);
    CHECK(info.normalize == (!plain && variant.at("normalize").get<bool>()));
    if (plain) CHECK(info.pooling == "mean");
    const Vectors want = variant.at("vectors").get<Vectors>();

    // One padded batch, every sequence alone, and a reordered batch.
    const Vectors batched = MustEmbed(*model, ids);
    CheckClose(batched, want, 1e-5, 1e-6);
    const Vectors single = OneAtATime(*model, ids);
    CheckClose(single, want, 1e-5, 1e-6);
    CheckClose(batched, single, 1e-5, 1e-7);
    Batch reversed(ids.rbegin(), ids.rend());
    Vectors reversed_want(want.rbegin(), want.rend());
    CheckClose(MustEmbed(*model, reversed), reversed_want, 1e-5, 1e-6);
    if (info.normalize) {
      for (const auto& v : batched) {
        const double norm = std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
        CHECK(std::fabs(norm - 1) <= 1e-5);
      }
    }
  }
}

TEST_CASE("tiny BERT folders match sentence-transformers in every pooling variant",
          "[engine][embedding]") {
  CheckTinyModel("tiny-bert", "BertModel");
}

TEST_CASE("tiny MPNet folders match sentence-transformers in every pooling variant",
          "[engine][embedding]") {
  CheckTinyModel("tiny-mpnet", "MPNetModel");
}

TEST_CASE("the pooling configs' modes and names are read as sentence-transformers reads them",
          "[engine][embedding]") {
  const json ref = ReadJson(kData / "tiny-bert.json");
  for (const json& variant : ref.at("variants")) {
    if (variant.value("plain", false)) continue;
    INFO(variant.at("name").get<std::string>());
    TempDir tmp;
    const auto model = MustLoad(WriteEmbeddingVariant("tiny-bert", variant, tmp.path()));
    const std::string name = variant.at("name").get<std::string>();
    const std::string want = name == "legacy cls+mean"    ? "cls+mean"
                             : name == "legacy lasttoken" ? "lasttoken"
                             : name == "mean+normalize"   ? "mean"
                                                          : name;
    CHECK(Info(*model).pooling == want);
    CHECK(Info(*model).include_prompt);
  }
}

// Older sentence-transformers folders keep the encoder (and its tokenizer) in
// a module subfolder such as 0_Transformer.
TEST_CASE("an encoder in a module subfolder loads from there", "[engine][embedding]") {
  const json ref = ReadJson(kData / "tiny-bert.json");
  TempDir tmp;
  const fs::path dir = CopyFolder("tiny-bert", tmp.path());
  const fs::path sub = dir / "0_Transformer";
  fs::create_directories(sub);
  for (const char* f : {"config.json", "model.safetensors", "sentence_bert_config.json",
                        "tokenizer.json", "tokenizer_config.json"}) {
    fs::rename(dir / f, sub / f);
  }
  json modules = ReadJson(dir / "modules.json");
  modules[0]["path"] = "0_Transformer";
  WriteJson(dir / "modules.json", modules);
  const auto model = MustLoad(dir);
  CHECK(Info(*model).tokenizer_dir == sub);
  CHECK(Info(*model).max_seq_length == ref.at("max_seq_length").get<int64_t>());
  CheckClose(MustEmbed(*model, IdsOf(ref)), ref.at("variants")[0].at("vectors").get<Vectors>(),
             1e-5, 1e-6);
  modules[0]["path"] = "../elsewhere";
  WriteJson(dir / "modules.json", modules);
  const auto r = LoadEmbeddingModel(dir, LoadOptions{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("leaves the model folder"));
}

// config.json may name a task-head architecture over the encoder
// (all-mpnet-base-v2 keeps "MPNetForMaskedLM"); its encoder is what runs, as
// with transformers' AutoModel.
TEST_CASE("a BertFor* / MPNetFor* architecture loads its encoder", "[engine][embedding]") {
  for (const auto& [name, head, arch] : {std::tuple{"tiny-mpnet", "MPNetForMaskedLM", "MPNetModel"},
                                         std::tuple{"tiny-bert", "BertForMaskedLM", "BertModel"}}) {
    INFO(name << " as " << head);
    const json ref = ReadJson(kData / (std::string(name) + ".json"));
    TempDir tmp;
    const fs::path dir = CopyFolder(name, tmp.path());
    json config = ReadJson(dir / "config.json");
    config["architectures"] = {head};
    WriteJson(dir / "config.json", config);
    const auto model = MustLoad(dir);
    CHECK(Info(*model).architecture == arch);
    CheckClose(MustEmbed(*model, IdsOf(ref)), ref.at("variants")[0].at("vectors").get<Vectors>(),
               1e-5, 1e-6);
  }
}

// A real model scripts/setup-embedding-models installs, by name; for
// all-MiniLM-L6-v2 MEDQ_EMBEDDING_MODEL may name another folder.
fs::path RealModelDir(const std::string& name) {
  if (const char* env = std::getenv("MEDQ_EMBEDDING_MODEL");
      env != nullptr && name == "all-MiniLM-L6-v2") {
    return env;
  }
  return fs::path(MEDQ_EMBEDDING_MODELS_DIR) / name;
}

struct RealModel {
  std::string name;          // folder under .cache/models and data/embeddings/NAME.json
  std::string architecture;  // what Info() reports
  int64_t dims = 0;
  int64_t max_seq_length = 0;
};

// The caller's side (the project's tokenizer) gives the Hugging Face ids for
// every text of data/embeddings/NAME.json, and Embed gives encode()'s vectors
// within 1e-4 cosine distance in batches of mixed lengths. (Every text in
// every build: LibTorch's kernels are not instrumented, so AddressSanitizer
// adds little: all-mpnet-base-v2 takes about 14 s in Release and 25 s under
// AddressSanitizer on 2 cores.)
void CheckRealModel(const RealModel& m) {
  const fs::path dir = RealModelDir(m.name);
  if (!fs::exists(dir / "model.safetensors")) {
    MEDQ_SKIP(m.name << " is not installed at " << dir.string()
                     << "; run scripts/setup-embedding-models");
  }
  const json ref = ReadJson(kData / (m.name + ".json"));
  const auto texts = ref.at("texts").get<std::vector<std::string>>();
  const Batch want_ids = IdsOf(ref);
  REQUIRE(texts.size() >= 200);
  REQUIRE(want_ids.size() == texts.size());
  const double quant = ref.at("quant").get<double>();
  Vectors want;
  for (const auto& q : ref.at("vectors")) {
    std::vector<float> v;
    for (const auto& x : q)
      v.push_back(static_cast<float>(x.get<double>() * quant));
    want.push_back(std::move(v));
  }

  const auto model = MustLoad(dir);
  const EmbeddingInfo& info = Info(*model);
  CHECK(info.architecture == m.architecture);
  CHECK(info.dims == m.dims);
  CHECK(info.max_seq_length == m.max_seq_length);
  CHECK(info.max_seq_length == ref.at("max_seq_length").get<int64_t>());
  CHECK(info.pooling == "mean");
  CHECK(info.normalize);
  CHECK_FALSE(info.do_lower_case);

  // The caller's side: tokenize with special tokens, truncate to
  // max_seq_length keeping the final [SEP] / </s> (what the HF tokenizer's
  // truncation gives for BertProcessing and RobertaProcessing).
  CHECK(info.tokenizer_dir == dir);
  auto tok = tokenizer::Tokenizer::FromModelDir(info.tokenizer_dir);
  REQUIRE(tok.ok());
  Batch ids;
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> seq = (*tok)->Encode(texts[i], true);
    if (static_cast<int64_t>(seq.size()) > info.max_seq_length) {
      const int32_t last = seq.back();
      seq.resize(static_cast<size_t>(info.max_seq_length - 1));
      seq.push_back(last);
    }
    INFO("text " << i << ": " << texts[i]);
    CHECK(seq == want_ids[i]);
    ids.push_back(std::move(seq));
  }
  // Some texts were truncated by sentence-transformers.
  CHECK(std::any_of(want_ids.begin(), want_ids.end(), [&](const auto& s) {
    return static_cast<int64_t>(s.size()) == info.max_seq_length;
  }));

  // Batches of 16 in length order (lengths within a batch still differ, as
  // in sentence-transformers' own batching), then one batch mixing the
  // shortest, empty-after-normalization and truncated texts with the rest.
  std::vector<size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return want_ids[a].size() < want_ids[b].size(); });
  std::vector<std::vector<size_t>> batches;
  for (size_t start = 0; start < order.size(); start += 16) {
    batches.emplace_back(
        order.begin() + static_cast<std::ptrdiff_t>(start),
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), start + 16)));
  }
  std::vector<size_t> mixed = {order.front(), order.back(), order[order.size() / 2], order[1],
                               order[order.size() - 2]};
  std::shuffle(mixed.begin(), mixed.end(), std::mt19937(7));
  batches.push_back(mixed);
  double worst = 0;
  for (const auto& members : batches) {
    Batch batch;
    for (const size_t i : members)
      batch.push_back(want_ids[i]);
    const Vectors got = MustEmbed(*model, batch);
    for (size_t k = 0; k < members.size(); ++k) {
      const size_t i = members[k];
      INFO("text " << i << ": " << texts[i]);
      const double d = CosineDistance(got[k], want[i]);
      CHECK(d <= 1e-4);
      CHECK(MaxAbsDiff(got[k], want[i]) <= 1e-4);
      worst = std::max(worst, d);
    }
  }
  std::printf("%s: max cosine distance to sentence-transformers over %zu texts: %.3g\n",
              m.name.c_str(), order.size(), worst);
  // Padding does not move a vector: a few texts alone against their batches.
  for (const size_t i : {order.front(), order[order.size() / 3], order.back()}) {
    INFO("text " << i);
    const Vectors alone = MustEmbed(*model, {want_ids[i]});
    CHECK(CosineDistance(alone[0], want[i]) <= 1e-4);
  }
}

TEST_CASE(
    "all-MiniLM-L6-v2: the project's tokenizer gives the HF ids, Embed gives encode()'s "
    "vectors",
    "[engine][embedding][real]") {
  CheckRealModel({"all-MiniLM-L6-v2", "BertModel", 384, 256});
}

// MPNet with its relative position bias, 12 layers; config.json names
// MPNetForMaskedLM (the encoder of which is what runs).
TEST_CASE(
    "all-mpnet-base-v2: the project's tokenizer gives the HF ids, Embed gives encode()'s "
    "vectors",
    "[engine][embedding][real]") {
  CheckRealModel({"all-mpnet-base-v2", "MPNetModel", 768, 384});
}

TEST_CASE("folders the loader refuses, with the reason named", "[engine][embedding]") {
  TempDir tmp;
  SECTION("no such directory") {
    const auto r = LoadEmbeddingModel(tmp.path() / "missing", LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kModelNotFound);
  }
  SECTION("only pytorch_model.bin") {
    const fs::path dir = CopyFolder("tiny-bert", tmp.path());
    fs::rename(dir / "model.safetensors", dir / "pytorch_model.bin");
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message,
               Catch::Contains("pytorch_model.bin") && Catch::Contains("safetensors"));
  }
  SECTION("an architecture other than BertModel and MPNetModel") {
    const fs::path dir = CopyFolder("tiny-bert", tmp.path());
    json config = ReadJson(dir / "config.json");
    config["architectures"] = {"XLMRobertaModel"};
    WriteJson(dir / "config.json", config);
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message, Catch::Contains("XLMRobertaModel"));
  }
  SECTION("a Pooling module without its config") {
    const fs::path dir = CopyFolder("tiny-mpnet", tmp.path());
    fs::remove(dir / "1_Pooling" / "config.json");
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message, Catch::Contains("Pooling"));
  }
  SECTION("a module type the engine does not run") {
    const fs::path dir = CopyFolder("tiny-bert", tmp.path());
    json modules = ReadJson(dir / "modules.json");
    modules[2]["type"] = "sentence_transformers.models.Dense";
    WriteJson(dir / "modules.json", modules);
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message, Catch::Contains("sentence_transformers.models.Dense"));
  }
  SECTION("an unknown pooling mode") {
    const fs::path dir = CopyFolder("tiny-bert", tmp.path());
    WriteJson(dir / "1_Pooling" / "config.json", json{{"pooling_mode", "median"}});
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("median"));
  }
  SECTION("a tensor missing from the checkpoint's names") {
    const fs::path dir = CopyFolder("tiny-bert", tmp.path());
    json config = ReadJson(dir / "config.json");
    config["num_hidden_layers"] = 3;
    WriteJson(dir / "config.json", config);
    const auto r = LoadEmbeddingModel(dir, LoadOptions{});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("encoder.layer.2."));
  }
  SECTION("bad options") {
    const fs::path dir = kData / "tiny-bert";
    LoadOptions o;
    o.dtype = "fp16";
    CHECK(LoadEmbeddingModel(dir, o).error().code == ErrorCode::kInvalidRequest);
    o.dtype = "auto";
    o.device = "tpu";
    CHECK(LoadEmbeddingModel(dir, o).error().code == ErrorCode::kInvalidRequest);
  }
}

TEST_CASE("Embed refuses bad batches and accepts an empty one", "[engine][embedding]") {
  const auto model = MustLoad(kData / "tiny-bert");
  const int64_t max_seq = Info(*model).max_seq_length;
  CHECK(MustEmbed(*model, {}).empty());
  const auto empty = Embed(*model, {{2, 3}, {}});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(empty.error().message, Catch::Contains("sequence 1"));
  std::vector<int32_t> too_long(static_cast<size_t>(max_seq + 1), 7);
  const auto long_result = Embed(*model, {too_long});
  REQUIRE_FALSE(long_result.ok());
  CHECK_THAT(long_result.error().message, Catch::Contains("max_seq_length"));
  too_long.pop_back();
  CHECK(Embed(*model, {too_long}).ok());
  const auto bad_id = Embed(*model, {{2, static_cast<int32_t>(Info(*model).vocab_size), 3}});
  REQUIRE_FALSE(bad_id.ok());
  CHECK_THAT(bad_id.error().message, Catch::Contains("outside the vocabulary"));
  CHECK_FALSE(Embed(*model, {{2, -1, 3}}).ok());
}

TEST_CASE("bf16 on the CPU stays close to float32", "[engine][embedding]") {
  const json ref = ReadJson(kData / "tiny-bert.json");
  LoadOptions o;
  o.dtype = "bf16";
  auto model = LoadEmbeddingModel(kData / "tiny-bert", o);
  REQUIRE(model.ok());
  CHECK(Info(**model).dtype == "bf16");
  const Vectors got = MustEmbed(**model, IdsOf(ref));
  const Vectors want = ref.at("variants")[0].at("vectors").get<Vectors>();
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(CosineDistance(got[i], want[i]) <= 2e-2);
}

}  // namespace
}  // namespace medq::engine::test
