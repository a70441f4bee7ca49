// Sharded loading (model.safetensors.index.json) equals single-file loading of
// the same tensors.
#include <catch2/catch.hpp>

#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// Writes every tensor of the shards into one model.safetensors in `out`.
void MergeShards(const fs::path& sharded, const fs::path& out) {
  std::map<std::string, at::Tensor> all;
  for (const auto& e : fs::directory_iterator(sharded)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("model-", 0) == 0 && e.path().extension() == ".safetensors") {
      for (auto& [k, v] : ReadTensors(e.path()))
        all[k] = v;
    }
  }
  std::vector<StWriteTensor> tensors;
  for (const auto& [name, t] : all) {
    REQUIRE(t.scalar_type() == at::kBFloat16);
    tensors.push_back({name, StDtype::kBF16, t.sizes().vec(), t.data_ptr(), t.nbytes()});
  }
  REQUIRE(WriteSafetensors(out / "model.safetensors", tensors).ok());
  fs::copy_file(sharded / "config.json", out / "config.json");
  fs::copy_file(sharded / "generation_config.json", out / "generation_config.json");
}

TEST_CASE("sharded loading equals single-file loading", "[engine][sharded]") {
  const auto sharded_dir = medq::test::ModelFixture("tiny-llama-sharded");
  TempDir tmp;
  MergeShards(sharded_dir, tmp.path());
  const auto sharded = MustLoad(sharded_dir);
  const auto single = MustLoad(tmp.path());
  const auto ref = ReadTensors(sharded_dir / "reference.safetensors");
  for (const std::string p : {"prompt1", "prompt2"}) {
    const at::Tensor ids = ref.at("input_ids_" + p);
    CHECK(MaxAbsDiff(AllLogits(*sharded, ids), AllLogits(*single, ids)) == 0.0);
  }
  CHECK(Info(*sharded).parameter_bytes == Info(*single).parameter_bytes);
}

TEST_CASE("a shard the index names but that lacks its tensor is refused", "[engine][sharded]") {
  const auto src = medq::test::ModelFixture("tiny-llama-sharded");
  TempDir tmp;
  for (const auto& e : fs::directory_iterator(src))
    fs::copy_file(e.path(), tmp.path() / e.path().filename());
  // Point norm at the wrong shard.
  std::string index = ReadText(tmp.path() / "model.safetensors.index.json");
  const std::string from = "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"";
  const auto pos = index.find(from);
  REQUIRE(pos != std::string::npos);
  index.replace(pos, from.size(), "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"");
  fs::remove(tmp.path() / "model.safetensors.index.json");
  WriteText(tmp.path() / "model.safetensors.index.json", index);
  auto r = LoadModel(tmp.path(), {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("model.norm.weight") &&
                                    Catch::Contains("model-00001-of-00002.safetensors"));
}

TEST_CASE("a bad shard index is refused", "[engine][sharded][corrupt]") {
  const auto src = medq::test::ModelFixture("tiny-llama-sharded");
  const auto copy_with_index = [&](const fs::path& dir, const std::string& from,
                                   const std::string& to) {
    for (const auto& e : fs::directory_iterator(src)) {
      if (e.path().filename() != "model.safetensors.index.json") {
        fs::copy_file(e.path(), dir / e.path().filename());
      }
    }
    std::string index = ReadText(src / "model.safetensors.index.json");
    const auto pos = index.find(from);
    REQUIRE(pos != std::string::npos);
    WriteText(dir / "model.safetensors.index.json", index.replace(pos, from.size(), to));
  };
  const std::string norm = "\"model.norm.weight\": \"model-00002-of-00002.safetensors\"";
  SECTION("a shard outside the model directory") {
    TempDir tmp;
    copy_with_index(tmp.path(), norm,
                    "\"model.norm.weight\": \"../model-00002-of-00002.safetensors\"");
    auto r = LoadModel(tmp.path(), {});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("not a file name in the model directory"));
  }
  SECTION("a missing shard") {
    TempDir tmp;
    copy_with_index(tmp.path(), norm,
                    "\"model.norm.weight\": \"model-00003-of-00002.safetensors\"");
    auto r = LoadModel(tmp.path(), {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK_THAT(r.error().message, Catch::Contains("model-00003-of-00002.safetensors"));
  }
  SECTION("not JSON") {
    TempDir tmp;
    copy_with_index(tmp.path(), "{", "[");
    auto r = LoadModel(tmp.path(), {});
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("model.safetensors.index.json"));
  }
}

}  // namespace
}  // namespace medq::engine::test
