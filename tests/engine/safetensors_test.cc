// The safetensors reader: a round trip, and every kind of broken file giving a
// clear error that names the file and the tensor (never a crash).
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

// A file with the given header text (length prefix `declared_len`, or the
// real length) followed by `data_bytes` zero bytes.
fs::path WriteRaw(const TempDir& dir, const std::string& header, size_t data_bytes,
                  std::optional<uint64_t> declared_len = std::nullopt) {
  const fs::path path = dir.path() / "t.safetensors";
  std::string bytes(8, '\0');
  const uint64_t len = declared_len.value_or(header.size());
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  bytes += header;
  bytes += std::string(data_bytes, '\0');
  WriteText(path, bytes);
  return path;
}

std::string OpenError(const fs::path& path) {
  auto r = SafetensorsFile::Open(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains(path.string()));
  return r.error().message;
}

TEST_CASE("safetensors round trip", "[engine][safetensors]") {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> b = {7, -8};
  const fs::path path = dir.path() / "x.safetensors";
  REQUIRE(WriteSafetensors(path, {{"a", StDtype::kF32, {2, 3}, a.data(), 24},
                                  {"b", StDtype::kI64, {2}, b.data(), 16}})
              .ok());
  auto file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  REQUIRE((*file)->tensors().size() == 2);
  const StTensorInfo* ia = (*file)->Find("a");
  REQUIRE(ia != nullptr);
  CHECK(ia->shape == std::vector<int64_t>{2, 3});
  CHECK(std::memcmp((*file)->Data(*ia), a.data(), 24) == 0);
  const at::Tensor tb = TensorView(*file, *(*file)->Find("b"));
  CHECK(tb[1].item<int64_t>() == -8);
  CHECK((*file)->Find("c") == nullptr);
}

TEST_CASE("corrupt safetensors files give clear errors", "[engine][safetensors][corrupt]") {
  TempDir dir;
  const std::string ok_entry = R"("w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";

  SECTION("shorter than the length prefix") {
    const fs::path p = dir.path() / "short.safetensors";
    WriteText(p, "abc");
    CHECK_THAT(OpenError(p), Catch::Contains("truncated"));
  }
  SECTION("header length past the end") {
    const auto p = WriteRaw(dir, "{" + ok_entry + "}", 16, 1000);
    CHECK_THAT(OpenError(p), Catch::Contains("past the end"));
  }
  SECTION("absurd header length") {
    const auto p = WriteRaw(dir, "{}", 0, uint64_t{1} << 60);
    CHECK_THAT(OpenError(p), Catch::Contains("exceeds"));
  }
  SECTION("truncated data section") {
    const auto p = WriteRaw(dir, "{" + ok_entry + "}", 10);
    const std::string e = OpenError(p);
    CHECK_THAT(e, Catch::Contains("'w'") && Catch::Contains("past the data section"));
  }
  SECTION("malformed JSON") {
    CHECK_THAT(OpenError(WriteRaw(dir, "{\"w\":", 0)), Catch::Contains("not well-formed JSON"));
    CHECK_THAT(OpenError(WriteRaw(dir, "[1,2]", 0)), Catch::Contains("not a JSON object"));
  }
  SECTION("overlapping tensors") {
    const auto p = WriteRaw(
        dir,
        R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
        16);
    CHECK_THAT(OpenError(p),
               Catch::Contains("overlaps") && Catch::Contains("'a'") && Catch::Contains("'b'"));
  }
  SECTION("offsets out of range or reversed") {
    CHECK_THAT(
        OpenError(WriteRaw(dir, R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})", 16)),
        Catch::Contains("'w'") && Catch::Contains("past the data section"));
    CHECK_THAT(
        OpenError(WriteRaw(dir, R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 16)),
        Catch::Contains("begin > end"));
    CHECK_THAT(
        OpenError(WriteRaw(dir, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 16)),
        Catch::Contains("data_offsets"));
  }
  SECTION("dtype x shape does not match the byte range") {
    const auto p =
        WriteRaw(dir, R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", 16);
    CHECK_THAT(OpenError(p), Catch::Contains("'w'") && Catch::Contains("needs 8 bytes"));
    const auto q = WriteRaw(
        dir, R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})",
        16);
    CHECK_THAT(OpenError(q), Catch::Contains("overflowing"));
  }
  SECTION("unknown dtype and bad shapes") {
    CHECK_THAT(
        OpenError(WriteRaw(dir, R"({"w":{"dtype":"F8_E9","shape":[4],"data_offsets":[0,4]}})", 4)),
        Catch::Contains("unknown dtype 'F8_E9'") && Catch::Contains("'w'"));
    CHECK_THAT(
        OpenError(WriteRaw(dir, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)),
        Catch::Contains("'w'") && Catch::Contains("shape"));
    CHECK_THAT(OpenError(WriteRaw(dir, R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4)),
               Catch::Contains("'shape'"));
  }
  SECTION("a missing file is kModelNotFound") {
    auto r = SafetensorsFile::Open(dir.path() / "none.safetensors");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kModelNotFound);
  }
}

}  // namespace
}  // namespace medq::engine::test
