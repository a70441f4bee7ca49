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
  CHECK_THAT(missing.error().message, Catch::Contains("good"));  // lists what exists
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
