#include "common/protocol.h"

#include <catch2/catch.hpp>

#include <utility>

#include "common/messages.h"

namespace medq {

using nlohmann::json;

namespace {
Error ParseError(std::string_view line, json* id) {
  auto r = ParseRequest(line, id);
  REQUIRE_FALSE(r.ok());
  return r.error();
}
}  // namespace

TEST_CASE("a well-formed request parses", "[protocol]") {
  json id;
  auto r = ParseRequest(R"({"v":1,"id":"a1","op":"health","params":{"x":1},"extra":true})", &id);
  REQUIRE(r.ok());
  CHECK(r->id == "a1");
  CHECK(r->op == "health");
  CHECK(r->params == json{{"x", 1}});
  CHECK(id == "a1");
}

TEST_CASE("params default to an empty object", "[protocol]") {
  json id;
  auto r = ParseRequest(R"({"v":1,"id":3,"op":"queue"})", &id);
  REQUIRE(r.ok());
  CHECK(r->params.is_object());
  CHECK(r->params.empty());
}

TEST_CASE("malformed requests name what is wrong", "[protocol]") {
  json id;
  CHECK(ParseError("{nope", &id).code == ErrorCode::kInvalidRequest);
  CHECK(id.is_null());
  CHECK(ParseError("[1,2]", &id).code == ErrorCode::kInvalidRequest);
  CHECK(ParseError("\"\xff\xfe\"", &id).code == ErrorCode::kInvalidRequest);  // not UTF-8
  CHECK_THAT(ParseError(R"({"v":1,"op":"health"})", &id).message, Catch::Contains("\"id\""));
  CHECK_THAT(ParseError(R"({"v":1,"id":{},"op":"health"})", &id).message,
             Catch::Contains("\"id\""));
  CHECK_THAT(ParseError(R"({"id":1,"op":"health"})", &id).message, Catch::Contains("\"v\""));
  CHECK(id == 1);  // read before the failure, so the error reply can echo it
  CHECK_THAT(ParseError(R"({"v":"1","id":1,"op":"health"})", &id).message,
             Catch::Contains("\"v\""));
  CHECK_THAT(ParseError(R"({"v":1,"id":1})", &id).message, Catch::Contains("\"op\""));
  CHECK_THAT(ParseError(R"({"v":1,"id":1,"op":7})", &id).message, Catch::Contains("\"op\""));
  CHECK_THAT(ParseError(R"({"v":1,"id":1,"op":"health","params":[]})", &id).message,
             Catch::Contains("\"params\""));
  CHECK(ParseError(R"({"v":2,"id":1,"op":"health"})", &id).code == ErrorCode::kUnsupportedVersion);
}

TEST_CASE("a line holding a NUL byte is refused, not cut short", "[protocol]") {
  json id;
  const std::string line = std::string(R"({"v":1,"id":1,"op":"health"})") + '\0' + "garbage";
  const Error e = ParseError(line, &id);
  CHECK(e.code == ErrorCode::kInvalidRequest);
  CHECK_THAT(e.message, Catch::Contains("NUL byte at byte 29"));
  CHECK(ParseBoundedJson(std::string("{}\0{", 4)).fault == BoundedJson::Fault::kSyntax);
  // Escaped, it is an ordinary character of a string.
  CHECK(ParseRequest(R"({"v":1,"id":1,"op":"tokenize","params":{"text":"a\u0000b"}})", &id).ok());
}

TEST_CASE("an unknown field's name is echoed at most 200 bytes long", "[protocol]") {
  const std::string key(15u << 20, 'k');
  const Status st = RejectUnknownFields(Params{{key, 1}}, {"model"});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.size() < 300);
  CHECK_THAT(st.error().message, Catch::Contains("(15728640 bytes)"));
}

TEST_CASE("nesting deeper than the limit is refused before parsing", "[protocol]") {
  // The hostile client's reproducer: 100,000 levels in template_kwargs used to
  // overflow the loop thread's stack in a recursive dump.
  std::string deep =
      R"({"v":1,"id":1,"op":"generate","params":{"prompt":"hi","template_kwargs":{"k":)";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}}}";
  json id;
  Error e = ParseError(deep, &id);
  CHECK(e.code == ErrorCode::kInvalidRequest);
  CHECK_THAT(e.message, Catch::Contains(std::to_string(kMaxJsonDepth)));
  CHECK(id == 1);  // the id sits above the limit, so the error can echo it

  // The limit counts the envelope's own levels: exactly kMaxJsonDepth passes.
  auto nested = [](int levels) {
    std::string line = R"({"v":1,"id":2,"op":"health","params":{"x":)";
    line += std::string(static_cast<size_t>(levels - 2), '[');
    line += std::string(static_cast<size_t>(levels - 2), ']') + "}}";
    return line;
  };
  CHECK(ParseRequest(nested(kMaxJsonDepth), &id).ok());
  CHECK_FALSE(ParseRequest(nested(kMaxJsonDepth + 1), &id).ok());
  // Brackets inside strings are text, not nesting.
  std::string text =
      R"({"v":1,"id":3,"op":"health","params":{"x":")" + std::string(1000, '[') + R"(\"{{{{"}})";
  CHECK(ParseRequest(text, &id).ok());
}

TEST_CASE("ids that cannot be echoed exactly get id null and say why", "[protocol]") {
  json id;
  Error huge = ParseError(R"({"v":1,"id":1e999,"op":"health"})", &id);
  CHECK(huge.code == ErrorCode::kInvalidRequest);
  CHECK_THAT(huge.message, Catch::Contains("out of range"));
  CHECK(id.is_null());
  Error big = ParseError(R"({"v":1,"id":18446744073709551616,"op":"health"})", &id);
  CHECK_THAT(big.message, Catch::Contains("2^64"));
  CHECK(id.is_null());
  CHECK(ParseRequest(R"({"v":1,"id":18446744073709551615,"op":"health"})", &id).ok());
  CHECK(id == 18446744073709551615ull);
  CHECK(ParseRequest(R"({"v":1,"id":-9223372036854775808,"op":"health"})", &id).ok());
}

TEST_CASE("replies are single compact lines", "[protocol]") {
  std::string line = EncodeResult(9, json{{"a", "x\ny"}});
  CHECK(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  json back = json::parse(line);
  CHECK(back["id"] == 9);
  CHECK(back["event"] == "result");
  CHECK(back["result"]["a"] == "x\ny");
}

TEST_CASE("error replies carry code, message and retry hint, and decode back", "[protocol]") {
  Error e(ErrorCode::kQueueFull, "Queue full (5/5). Try again later.", 12);
  json j = json::parse(EncodeError("r1", e));
  CHECK(j["event"] == "error");
  CHECK(j["code"] == "QUEUE_FULL");
  CHECK(j["retry_after_s"] == 12);
  Error back = DecodeError(j);
  CHECK(back.code == ErrorCode::kQueueFull);
  CHECK(back.message == e.message);
  CHECK(back.retry_after_s == 12);
  CHECK_FALSE(
      json::parse(EncodeError(1, Error(ErrorCode::kInternal, "x"))).contains("retry_after_s"));
}

TEST_CASE("an error about one field names it in param, and decodes back", "[protocol]") {
  json j = json::parse(EncodeError(4, InvalidAt("params.temperature", "must be a number")));
  CHECK(j["code"] == "INVALID_REQUEST");
  CHECK(j["param"] == "temperature");
  CHECK(DecodeError(j).param == "temperature");
  // An error about no field carries none.
  json none = json::parse(EncodeError(4, Error(ErrorCode::kQueueFull, "full", 1)));
  CHECK_FALSE(none.contains("param"));
  CHECK_FALSE(DecodeError(none).param.has_value());
  // RejectUnknownFields names the field it refuses.
  const Status unknown = RejectUnknownFields(Params{{"tempreature", 1}}, {"temperature"});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().param == "tempreature");
}

TEST_CASE("a generation's events have one JSON form each, read back by type", "[protocol]") {
  const GenerateEvent queued = QueuedEvent{"j7", 2, 5, 1.5};
  const GenerateEvent started = StartedEvent{"j7"};
  TokenEvent token;
  token.text = "Hi";
  token.ids = {5, 6};
  token.index = 1;
  for (const GenerateEvent& event : {queued, started, GenerateEvent(token)}) {
    json line = json::parse(EncodeEvent("r", EventName(event), EventFields(event)));
    const std::optional<GenerateEvent> back = GenerateEventOf(line);
    REQUIRE(back.has_value());
    CHECK(back->index() == event.index());
    CHECK(EventFields(*back) == EventFields(event));
  }
  json q = json::parse(EncodeEvent("r", EventName(queued), EventFields(queued)));
  CHECK(q["event"] == "queued");
  CHECK(q["job"] == "j7");
  CHECK(q["position"] == 2);
  CHECK(q["queue_length"] == 5);
  CHECK(q["estimated_wait_s"] == 1.5);
  CHECK(EventName(started) == "started");
  CHECK(EventName(GenerateEvent(token)) == "token");
  // Other replies are not events of a generation.
  CHECK_FALSE(GenerateEventOf(json{{"event", "done"}}).has_value());
  CHECK_FALSE(GenerateEventOf(json{{"id", 1}}).has_value());
}

TEST_CASE("a generation's end reads back with its finish reason typed", "[protocol]") {
  const std::pair<FinishReason, std::string> kNames[] = {{FinishReason::kStop, "stop"},
                                                         {FinishReason::kLength, "length"},
                                                         {FinishReason::kCancelled, "cancelled"},
                                                         {FinishReason::kToolCalls, "tool_calls"}};
  for (const auto& [reason, name] : kNames) {
    GenerateDone done;
    done.finish_reason = reason;
    const json j = done;
    CHECK(j["finish_reason"] == name);
    CHECK(FinishReasonName(reason) == name);
    CHECK(j.get<GenerateDone>().finish_reason == reason);
  }
  CHECK(json{{"finish_reason", "length"}}.get<GenerateDone>().finish_reason ==
        FinishReason::kLength);
  // A reason this client does not know (a newer daemon's) reads as stop.
  CHECK(json{{"finish_reason", "content_filter"}}.get<GenerateDone>().finish_reason ==
        FinishReason::kStop);
}

TEST_CASE("an error message with invalid UTF-8 still encodes to valid JSON", "[protocol]") {
  std::string line = EncodeError(1, Error(ErrorCode::kModelNotFound, "no model at /m/\xff"));
  json j = json::parse(line);  // throws if invalid
  CHECK(j["code"] == "MODEL_NOT_FOUND");
}

TEST_CASE("an unknown error code from a newer daemon becomes INTERNAL", "[protocol]") {
  Error e = DecodeError(json{{"event", "error"}, {"code", "BRAND_NEW"}, {"message", "m"}});
  CHECK(e.code == ErrorCode::kInternal);
  CHECK_THAT(e.message, Catch::Contains("BRAND_NEW"));
}

TEST_CASE("an error reply with fields of the wrong type decodes, never throws", "[protocol]") {
  // json::value threw on a code or message that is not a string.
  Error e = DecodeError(json{{"event", "error"}, {"code", 1}, {"message", {"a", "b"}}});
  CHECK(e.code == ErrorCode::kInternal);
  Error m = DecodeError(json{{"event", "error"}, {"code", "QUEUE_FULL"}, {"message", nullptr}});
  CHECK(m.code == ErrorCode::kQueueFull);
  CHECK(m.message.empty());
}

TEST_CASE("unknown params are rejected by name", "[protocol]") {
  CHECK(RejectUnknownFields(json{{"a", 1}}, {"a", "b"}).ok());
  Status s = RejectUnknownFields(json{{"a", 1}, {"typo", 2}}, {"a"});
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(s.error().message, Catch::Contains("params.typo"));
}

}  // namespace medq
