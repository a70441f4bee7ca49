#include "common/error.h"

#include <catch2/catch.hpp>

#include "common/result.h"

namespace medq {

TEST_CASE("every error code round-trips through its wire name", "[error]") {
  const ErrorCode all[] = {ErrorCode::kInvalidRequest,     ErrorCode::kUnknownOp,
                           ErrorCode::kUnsupportedVersion, ErrorCode::kTooLarge,
                           ErrorCode::kPermissionDenied,   ErrorCode::kNotReady,
                           ErrorCode::kQueueFull,          ErrorCode::kQueueTimeout,
                           ErrorCode::kModelNotFound,      ErrorCode::kGpuOom,
                           ErrorCode::kInsufficientMemory, ErrorCode::kCancelled,
                           ErrorCode::kInternal,           ErrorCode::kTimeout};
  for (ErrorCode code : all) {
    auto name = ErrorCodeName(code);
    CAPTURE(name);
    REQUIRE(ErrorCodeFromName(name) == code);
  }
  REQUIRE_FALSE(ErrorCodeFromName("NO_SUCH_CODE").has_value());
}

TEST_CASE("a client's value is echoed whole up to 200 bytes, cut on a character past it",
          "[error]") {
  CHECK(Echo("tiny-llama") == "tiny-llama");
  CHECK(Echo(std::string(200, 'a')) == std::string(200, 'a'));
  const std::string huge(15u << 20, 'x');
  CHECK(Echo(huge) == std::string(200, 'x') + "\u2026 (15728640 bytes)");
  // 199 ASCII bytes, then a 3-byte character across the cut: it is left out
  // whole, never split.
  const std::string split = std::string(199, 'a') + "\u20ac" + std::string(50, 'b');
  CHECK(Echo(split) == std::string(199, 'a') + "\u2026 (252 bytes)");
}

TEST_CASE("a place in the request names its top-level field", "[error]") {
  CHECK(ParamOf("params.temperature") == "temperature");
  CHECK(ParamOf("params.response_format.json_schema.schema") == "response_format");
  CHECK(ParamOf("params.input[3]") == "input");
  CHECK(ParamOf("params.model: x is an embedding model") == "model");
  CHECK(ParamOf("params.top_k2") == "top_k2");
  CHECK_FALSE(ParamOf("params.").has_value());
  CHECK_FALSE(ParamOf("params").has_value());
  CHECK_FALSE(ParamOf("model x").has_value());
  CHECK_FALSE(ParamOf("params.a-b").has_value());
  CHECK(InvalidAt("params.stop[2]", "must be a string").param == "stop");
  CHECK(InvalidRequest("params.seed must be an integer").param == "seed");
  CHECK_FALSE(InvalidRequest("exactly one of params.prompt and params.messages").param);
  CHECK(InvalidField("echo", "'echo' is not supported").param == "echo");
  CHECK_FALSE(Error(ErrorCode::kQueueFull, "full").param.has_value());
}

TEST_CASE("error codes map to sysexits statuses", "[error]") {
  CHECK(ExitStatusFor(ErrorCode::kInvalidRequest) == 65);
  CHECK(ExitStatusFor(ErrorCode::kUnknownOp) == 64);
  CHECK(ExitStatusFor(ErrorCode::kQueueFull) == 75);
  CHECK(ExitStatusFor(ErrorCode::kGpuOom) == 75);
  CHECK(ExitStatusFor(ErrorCode::kPermissionDenied) == 77);
  CHECK(ExitStatusFor(ErrorCode::kNotReady) == 75);
  CHECK(ExitStatusFor(ErrorCode::kInternal) == 70);
  CHECK(ExitStatusFor(ErrorCode::kTimeout) == 75);
}

TEST_CASE("Result holds a value or an error", "[error]") {
  Result<int> good = 3;
  REQUIRE(good.ok());
  CHECK(*good == 3);
  Result<int> bad = Error(ErrorCode::kTooLarge, "too big");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == ErrorCode::kTooLarge);
  Status s = Error(ErrorCode::kCancelled, "stop");
  CHECK_FALSE(s.ok());
  CHECK(Status::Ok().ok());
}

}  // namespace medq
