#include "common/protocol.h"

namespace medq {
namespace {

using nlohmann::json;

std::string Dump(const json& j) {
  // `replace` keeps a reply valid even when a message carries bytes that are
  // not UTF-8 (e.g. a path); they become U+FFFD.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

bool IsValidId(const Params& id) {
  return id.is_string() || id.is_number_integer();
}

// reply[key] when it is a string, else "" (json::value would throw on another
// type, and the reply comes from outside).
std::string StringField(const json& reply, const char* key) {
  const auto it = reply.find(key);
  return it != reply.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

BoundedJson ParseBoundedJson(std::string_view text) {
  BoundedJson out;
  // The callback's depth is the number of arrays and objects around the one
  // starting: kMaxJsonDepth of them make it level kMaxJsonDepth + 1.
  const Params::parser_callback_t depth_guard = [&out](int depth, Params::parse_event_t event,
                                                       Params&) {
    if ((event == Params::parse_event_t::object_start ||
         event == Params::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      out.too_deep = true;
      return false;  // discard it and everything inside
    }
    return true;
  };
  // The parser takes a NUL byte for the end of its input and would ignore
  // what follows; JSON text never holds one (a string writes it \u0000).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    out.fault = BoundedJson::Fault::kSyntax;
    out.byte = nul + 1;
    out.value = Params(Params::value_t::discarded);
    return out;
  }
  try {
    out.value = Params::parse(text, depth_guard);
  } catch (const json::parse_error& e) {
    out.fault = BoundedJson::Fault::kSyntax;
    out.byte = e.byte;
    out.value = Params(Params::value_t::discarded);
  } catch (const json::exception&) {
    // out_of_range 406: a number such as 1e999 that no double holds.
    out.fault = BoundedJson::Fault::kOutOfRange;
    out.value = Params(Params::value_t::discarded);
  }
  return out;
}

std::string TooDeepMessage(std::string_view what) {
  return std::string(what) + " nests arrays and objects deeper than " +
         std::to_string(kMaxJsonDepth) + " levels, the limit";
}

Result<Request> ParseRequest(std::string_view line, json* id_out) {
  *id_out = nullptr;
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
    return Error(ErrorCode::kInvalidRequest,
                 "request line holds a NUL byte at byte " + std::to_string(nul + 1) +
                     ": JSON text has none (inside a string, write \\u0000)");
  }
  // Parsed keeping the keys' order (Params), so that params reach the ops as
  // the client wrote them; bounded in depth before any deep value is built.
  BoundedJson parsed = ParseBoundedJson(line);
  switch (parsed.fault) {
    case BoundedJson::Fault::kNone:
      break;
    case BoundedJson::Fault::kSyntax:
      return Error(ErrorCode::kInvalidRequest,
                   "request is not valid JSON (or not UTF-8) near byte " +
                       std::to_string(parsed.byte) + ": send one JSON object per line");
    case BoundedJson::Fault::kOutOfRange:
      return Error(
          ErrorCode::kInvalidRequest,
          "request holds a number out of range (e.g. 1e999): send one JSON object per line");
  }
  Params& doc = parsed.value;
  if (!doc.is_object()) {
    return Error(ErrorCode::kInvalidRequest, "request must be a JSON object");
  }
  auto id = doc.find("id");
  if (id == doc.end()) return Error(ErrorCode::kInvalidRequest, "missing field \"id\"");
  if (!IsValidId(*id)) {
    return Error(ErrorCode::kInvalidRequest,
                 "field \"id\" must be a string or an integer between -2^63 and 2^64-1; "
                 "this reply carries id null because the id cannot be echoed exactly");
  }
  *id_out = *id;
  if (parsed.too_deep) return Error(ErrorCode::kInvalidRequest, TooDeepMessage("request"));
  auto v = doc.find("v");
  if (v == doc.end()) {
    return Error(ErrorCode::kInvalidRequest, "missing field \"v\" (protocol version, use 1)");
  }
  if (!v->is_number_integer()) {
    return Error(ErrorCode::kInvalidRequest, "field \"v\" must be an integer");
  }
  if (v->get<int64_t>() != kProtocolVersion) {
    return Error(ErrorCode::kUnsupportedVersion, "protocol version " + v->dump() +
                                                     " is not supported; this daemon speaks v" +
                                                     std::to_string(kProtocolVersion));
  }
  auto op = doc.find("op");
  if (op == doc.end()) return Error(ErrorCode::kInvalidRequest, "missing field \"op\"");
  if (!op->is_string()) return Error(ErrorCode::kInvalidRequest, "field \"op\" must be a string");

  Request req;
  req.id = *id;
  req.op = op->get<std::string>();
  if (auto params = doc.find("params"); params != doc.end() && !params->is_null()) {
    if (!params->is_object()) {
      return Error(ErrorCode::kInvalidRequest, "field \"params\" must be an object");
    }
    req.params = std::move(*params);
  }
  return req;
}

std::string EncodeRequest(const json& id, std::string_view op, const Params& params) {
  Params j = {{"v", kProtocolVersion}, {"id", id}, {"op", op}};
  if (!params.empty()) j["params"] = params;
  return j.dump(-1, ' ', false, Params::error_handler_t::replace) + "\n";
}

std::string EncodeResult(const json& id, const json& result) {
  return Dump(json{{"id", id}, {"event", "result"}, {"result", result}});
}

std::string EncodeEvent(const json& id, std::string_view event, json fields) {
  json j = {{"id", id}, {"event", event}};
  for (auto& [key, value] : fields.items())
    j[key] = std::move(value);
  return Dump(j);
}

std::string EncodeError(const json& id, const Error& error) {
  json j = {{"id", id},
            {"event", "error"},
            {"code", ErrorCodeName(error.code)},
            {"message", error.message}};
  if (error.retry_after_s) j["retry_after_s"] = *error.retry_after_s;
  if (error.param) j["param"] = *error.param;
  return Dump(j);
}

Error DecodeError(const json& reply) {
  const std::string code_name = StringField(reply, "code");
  std::string message = StringField(reply, "message");
  std::optional<double> retry;
  if (auto it = reply.find("retry_after_s"); it != reply.end() && it->is_number()) {
    retry = it->get<double>();
  }
  if (auto code = ErrorCodeFromName(code_name)) {
    Error error(*code, std::move(message), retry);
    if (auto it = reply.find("param"); it != reply.end() && it->is_string()) {
      error.param = it->get<std::string>();
    }
    return error;
  }
  return Error(ErrorCode::kInternal, "unknown error code \"" + code_name + "\": " + message);
}

Status RejectUnknownFields(const Params& params, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : params.items()) {
    bool found = false;
    for (std::string_view k : known)
      found = found || k == key;
    if (!found) {
      return InvalidField(key, "unknown field \"params." + Echo(key) + "\"");
    }
  }
  return Status::Ok();
}

}  // namespace medq
