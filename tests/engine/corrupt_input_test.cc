// Broken model directories: each gives a clear error naming the file, tensor
// or key, through the public LoadModel.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

const fs::path kTinyLlama = medq::test::ModelFixture("tiny-llama");

// tiny-llama's config plus its tensors after `edit`, written into `dir`.
void WriteModel(const fs::path& dir,
                const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  fs::copy_file(kTinyLlama / "config.json", dir / "config.json");
  auto tensors = ReadTensors(kTinyLlama / "model.safetensors");
  edit(tensors);
  std::vector<StWriteTensor> out;
  for (const auto& [name, t] : tensors) {
    out.push_back({name, t.scalar_type() == at::kFloat ? StDtype::kF32 : StDtype::kBF16,
                   t.sizes().vec(), t.data_ptr(), t.nbytes()});
  }
  REQUIRE(WriteSafetensors(dir / "model.safetensors", out).ok());
}

Error LoadError(const fs::path& dir) {
  auto r = LoadModel(dir, {});
  REQUIRE_FALSE(r.ok());
  return r.error();
}

TEST_CASE("broken model directories are refused clearly", "[engine][corrupt]") {
  TempDir tmp;
  const fs::path dir = tmp.path();
  SECTION("missing directory") {
    CHECK(LoadError(dir / "nope").code == ErrorCode::kModelNotFound);
  }
  SECTION("no config.json") {
    const Error e = LoadError(dir);
    CHECK(e.code == ErrorCode::kInvalidRequest);
    CHECK_THAT(e.message, Catch::Contains("config.json"));
  }
  SECTION("no weights") {
    fs::copy_file(kTinyLlama / "config.json", dir / "config.json");
    CHECK_THAT(LoadError(dir).message, Catch::Contains("model.safetensors"));
  }
  SECTION("missing tensor") {
    WriteModel(dir, [](auto& t) { t.erase("model.layers.1.mlp.up_proj.weight"); });
    const Error e = LoadError(dir);
    CHECK(e.code == ErrorCode::kInvalidRequest);
    CHECK_THAT(e.message,
               Catch::Contains("model.layers.1.mlp.up_proj.weight") && Catch::Contains("missing"));
  }
  SECTION("unexpected tensor") {
    WriteModel(dir, [](auto& t) { t["model.layers.7.extra.weight"] = at::zeros({2}); });
    CHECK_THAT(LoadError(dir).message,
               Catch::Contains("unexpected") && Catch::Contains("model.layers.7.extra.weight"));
  }
  SECTION("wrong shape") {
    WriteModel(dir, [](auto& t) { t["model.norm.weight"] = at::ones({63}); });
    CHECK_THAT(LoadError(dir).message,
               Catch::Contains("model.norm.weight") && Catch::Contains("[63]"));
  }
  SECTION("truncated weights file") {
    fs::copy_file(kTinyLlama / "config.json", dir / "config.json");
    const std::string bytes = ReadText(kTinyLlama / "model.safetensors");
    WriteText(dir / "model.safetensors", bytes.substr(0, bytes.size() / 2));
    const Error e = LoadError(dir);
    CHECK(e.code == ErrorCode::kInvalidRequest);
    CHECK_THAT(e.message,
               Catch::Contains("model.safetensors") && Catch::Contains("past the data section"));
  }
  SECTION("unknown architecture") {
    WriteModel(dir, [](auto&) {});
    auto j = nlohmann::json::parse(ReadText(dir / "config.json"));
    j["architectures"] = {"FalconForCausalLM"};
    fs::remove(dir / "config.json");
    WriteText(dir / "config.json", j.dump());
    CHECK_THAT(LoadError(dir).message,
               Catch::Contains("FalconForCausalLM") && Catch::Contains("Qwen3ForCausalLM"));
  }
  SECTION("bad options") {
    CHECK(LoadModel(kTinyLlama, {"tpu", "auto"}).error().code == ErrorCode::kInvalidRequest);
    CHECK(LoadModel(kTinyLlama, {"cpu", "fp8"}).error().code == ErrorCode::kInvalidRequest);
    CHECK(LoadModel(kTinyLlama, {"cpu", "fp16"}).error().code == ErrorCode::kInvalidRequest);
  }
}

}  // namespace
}  // namespace medq::engine::test
