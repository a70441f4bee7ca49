#include "daemon/model_resolver.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/support/daemon_process.h"

namespace medq::daemon {
namespace fs = std::filesystem;

TEST_CASE("names resolve inside the models directory and nowhere else", "[models]") {
  test::TempDir tmp;
  const fs::path models = tmp.path() / "models";
  fs::create_directories(models / "good");
  fs::create_directories(tmp.path() / "secret");
  fs::create_directory_symlink(tmp.path() / "secret", models / "link-out");
  fs::create_directory_symlink(models / "good", models / "alias");
  ModelResolver r(models, /*allow_paths=*/false);

  auto good = r.Resolve("good", "model");
  REQUIRE(good.ok());
  CHECK(*good == fs::canonical(models / "good"));
  CHECK(r.Resolve("alias", "model").ok());  // a symlink that stays inside is fine

  CHECK(r.Resolve("link-out", "model").error().code == ErrorCode::kPermissionDenied);
  CHECK(r.Resolve("..", "model").error().code == ErrorCode::kModelNotFound);
  CHECK(r.Resolve("../secret", "model").error().code == ErrorCode::kModelNotFound);
  CHECK(r.Resolve("", "model").error().code == ErrorCode::kModelNotFound);
  auto missing = r.Resolve("nope", "model");
  CHECK(missing.error().code == ErrorCode::kModelNotFound);
  CHECK_THAT(missing.error().message, Catch::Contains("good"));               // lists what exists
  CHECK(missing.error().message.find(models.string()) == std::string::npos);  // no paths
  CHECK(r.Resolve("link-out", "model").error().message.find(models.string()) == std::string::npos);
  CHECK(r.Resolve((models / "good").string(), "model").error().code ==
        ErrorCode::kPermissionDenied);
  CHECK(r.Available() == std::vector<std::string>{"alias", "good", "link-out"});
}

TEST_CASE("absolute paths are accepted only when allowed", "[models]") {
  test::TempDir tmp;
  fs::create_directories(tmp.path() / "elsewhere");
  ModelResolver r(tmp.path() / "models", /*allow_paths=*/true);
  auto p = r.Resolve((tmp.path() / "elsewhere").string(), "adapter");
  REQUIRE(p.ok());
  CHECK(*p == fs::canonical(tmp.path() / "elsewhere"));
  CHECK(r.Resolve((tmp.path() / "missing").string(), "adapter").error().code ==
        ErrorCode::kModelNotFound);
}

}  // namespace medq::daemon

namespace medq::daemon {
namespace fs = std::filesystem;

TEST_CASE("names not in the models directory are looked up among the built-in models", "[models]") {
  test::TempDir tmp;
  const fs::path models = tmp.path() / "models", builtin = tmp.path() / "builtin";
  fs::create_directories(models / "mine");
  fs::create_directories(models / "shared-name");
  fs::create_directories(builtin / "demo");
  fs::create_directories(builtin / "shared-name");
  fs::create_directories(tmp.path() / "secret");
  fs::create_directory_symlink(tmp.path() / "secret", builtin / "escape");
  ModelResolver r(models, /*allow_paths=*/false, builtin);

  CHECK(*r.Resolve("demo", "model") == fs::canonical(builtin / "demo"));
  CHECK(*r.Resolve("mine", "model") == fs::canonical(models / "mine"));
  // The models directory shadows a built-in model of the same name.
  CHECK(*r.Resolve("shared-name", "model") == fs::canonical(models / "shared-name"));
  // The built-in folder is held to the same containment rule.
  CHECK(r.Resolve("escape", "model").error().code == ErrorCode::kPermissionDenied);
  auto missing = r.Resolve("nope", "model");
  CHECK(missing.error().code == ErrorCode::kModelNotFound);
  CHECK_THAT(missing.error().message, Catch::Contains("demo") && Catch::Contains("mine"));
  CHECK(r.Available() == std::vector<std::string>{"demo", "escape", "mine", "shared-name"});
}

TEST_CASE("a model name's :none, :int8 or :int4 suffix is its quantization", "[models]") {
  const auto plain = SplitModelName("Qwen2.5-7B");
  REQUIRE(plain.ok());
  CHECK(plain->folder == "Qwen2.5-7B");
  CHECK(plain->quantize.empty());
  for (const std::string q : {"none", "int8", "int4"}) {
    const auto split = SplitModelName("Qwen2.5-7B:" + q);
    REQUIRE(split.ok());
    CHECK(split->folder == "Qwen2.5-7B");
    CHECK(split->quantize == q);
  }
  CHECK(SplitModelName("/models/a:b/qwen:int8")->folder == "/models/a:b/qwen");
  CHECK(SplitModelName("/models/a:b/qwen")->quantize.empty());  // a ':' in a folder
  for (const std::string bad : {"qwen:fp8", "qwen:", "qwen:INT4"}) {
    CAPTURE(bad);
    const auto r = SplitModelName(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK(r.error().param == "model");
    CHECK_THAT(r.error().message, Catch::Contains("none, int8, int4"));
  }
}

}  // namespace medq::daemon
