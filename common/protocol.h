// The wire envelope of the medq protocol (docs/protocol.md): one compact UTF-8
// JSON object per line, in both directions.
//
//   request: {"v":1,"id":<string|integer>,"op":"<name>","params":{...}}
//   reply:   {"id":<same>,"event":"result","result":{...}}
//            {"id":<same>,"event":"error","code":"...","message":"...","retry_after_s":N}
//
// Streaming ops send further events (queued, started, token, done) with the
// same id before their one final reply (`done`, `result` or `error`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/result.h"

namespace medq {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kDefaultMaxMessageBytes = 16u << 20;  // 16 MiB per line
// The deepest nesting of arrays and objects a request may hold, the envelope
// included. Everything that walks a request (serializers, the chat template's
// `tojson`) recurses once per level, so the bound is applied while parsing,
// before any deep value is built: a 160 KB line of brackets must not overflow
// a stack. Real requests (tool schemas included) stay far below it.
inline constexpr int kMaxJsonDepth = 64;

// An op's params as the client sent them: an object that keeps its keys in
// the client's order, end to end (a chat template renders `tools` and
// `template_kwargs` in that order, as transformers does).
using Params = nlohmann::ordered_json;

// A parsed request. `id` is a string or an integer; `params` is always an
// object (empty when the request has none).
struct Request {
  nlohmann::json id;
  std::string op;
  Params params = Params::object();
};

// A JSON text parsed with its nesting bounded (kMaxJsonDepth): the parse of
// every request a client sends, a socket line and an HTTP body alike. nlohmann's parser is
// iterative; a parser callback drops every array and object below the limit before it is built, so
// nothing recursive (dump, copy, destruction, a template's `tojson`) ever sees a deep value,
// however deep the text. Keys keep the client's order (Params). Never throws.
struct BoundedJson {
  enum class Fault {
    kNone,
    kSyntax,      // not JSON, or not UTF-8: `byte` is where it went wrong
    kOutOfRange,  // a number no double holds (1e999)
  };
  Fault fault = Fault::kNone;
  size_t byte = 0;
  // Some array or object was deeper than kMaxJsonDepth levels (the outermost
  // value is level 1); it was left out of `value`, which the caller must
  // then refuse (after reading what it needs to answer, such as an id).
  bool too_deep = false;
  Params value;  // discarded on a fault
};
BoundedJson ParseBoundedJson(std::string_view text);

// "<what> nests arrays and objects deeper than 64 levels, the limit".
std::string TooDeepMessage(std::string_view what);

// Parses and validates one request line (without its newline).
// On failure the Error says which field is wrong; `id_out` receives the
// request's id whenever it could be read, so that the error reply can echo it
// (null otherwise: unparsable JSON, or an id that is neither a string nor an
// integer in [-2^63, 2^64), such as 1e999, 2^64 or 1.5, which cannot be
// echoed exactly). Unknown top-level fields are ignored; `params` is checked
// by each op's own parser.
Result<Request> ParseRequest(std::string_view line, nlohmann::json* id_out);

// Serializes a request line, newline included.
std::string EncodeRequest(const nlohmann::json& id, std::string_view op,
                          const Params& params = Params::object());

// Reply lines, newline included. Strings are emitted as valid UTF-8 (invalid
// bytes in a message are replaced), so a reply line always parses.
std::string EncodeResult(const nlohmann::json& id, const nlohmann::json& result);
std::string EncodeEvent(const nlohmann::json& id, std::string_view event, nlohmann::json fields);
std::string EncodeError(const nlohmann::json& id, const Error& error);

// Parses an `error` event back into an Error (for clients). A code outside
// the closed set becomes INTERNAL with the unknown code named in the message;
// a code or message that is missing or not a string reads as "". Never throws.
Error DecodeError(const nlohmann::json& reply);

// For op parsers: INVALID_REQUEST naming the first key of `params` that is
// not in `known`. Ops reject unknown params so that a typo never passes.
Status RejectUnknownFields(const Params& params, std::initializer_list<std::string_view> known);

}  // namespace medq
