#include "daemon/http/routes.h"

#include <spdlog/spdlog.h>

#include <cctype>

namespace medq::daemon::http {
namespace {

constexpr Route kRoutes[] = {
    {"POST", "/v1/chat/completions", &ChatCompletions},
    {"POST", "/v1/completions", &Completions},
    {"POST", "/v1/embeddings", &Embeddings},
    {"GET", "/v1/models", &ListModels},
    {"GET", "/v1/models/", &RetrieveModel, /*takes_param=*/true},
    {"GET", "/health", &HealthRoute},
    {"GET", "/metrics", &MetricsRoute},
};

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kString:
      return "a string";
    case Kind::kNumber:
      return "a number";
    case Kind::kInteger:
      return "an integer";
    case Kind::kBoolean:
      return "a boolean";
    case Kind::kArray:
      return "an array";
    case Kind::kObject:
      return "an object";
  }
  return "?";
}

bool IsKind(const Params& v, Kind kind) {
  switch (kind) {
    case Kind::kString:
      return v.is_string();
    case Kind::kNumber:
      return v.is_number();
    case Kind::kInteger:
      return v.is_number_integer();
    case Kind::kBoolean:
      return v.is_boolean();
    case Kind::kArray:
      return v.is_array();
    case Kind::kObject:
      return v.is_object();
  }
  return false;
}

}  // namespace

std::span<const Route> Routes() {
  return kRoutes;
}

void Dispatch(DaemonState& state, HttpConnection& connection, HttpRequest request) {
  auto exchange = std::make_shared<HttpExchange>(connection.weak_from_this(), request);
  connection.Hold(exchange);
  const std::string& method = request.method == "HEAD" ? "GET" : request.method;
  std::string allow;
  for (const Route& route : kRoutes) {
    const bool matches = route.takes_param
                             ? request.path.size() > route.path.size() &&
                                   request.path.compare(0, route.path.size(), route.path) == 0
                             : route.path == request.path;
    if (!matches) continue;
    if (route.method == method) {
      try {
        route.handler(state, request, exchange);
      } catch (const std::exception& e) {
        spdlog::error("http {} {} failed with an unexpected exception: {}", request.method,
                      request.path, e.what());
        exchange->RespondError(Error(ErrorCode::kInternal, "internal error; see the daemon's log"));
      }
      return;
    }
    allow += (allow.empty() ? "" : ", ") + std::string(route.method);
    if (route.method == "GET") allow += ", HEAD";
  }
  if (!allow.empty()) {
    exchange->AddHeader("allow", allow);
    return exchange->RespondError(
        HttpError{405, "invalid_request_error", "method_not_allowed", std::nullopt, std::nullopt,
                  request.method + " is not allowed on " + request.path + "; use " + allow});
  }
  exchange->RespondError(HttpError{404, "invalid_request_error", "unknown_url", std::nullopt,
                                   std::nullopt,
                                   "unknown route " + request.method + " " + request.path +
                                       "; see docs/http.md for the routes"});
}

std::optional<std::string> PathParam(std::string_view prefix, const HttpRequest& request) {
  if (request.path.size() <= prefix.size()) return std::nullopt;
  const std::string_view raw = std::string_view(request.path).substr(prefix.size());
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '/') return std::nullopt;
    if (raw[i] != '%') {
      out += raw[i];
      continue;
    }
    if (i + 2 >= raw.size() || !std::isxdigit(static_cast<unsigned char>(raw[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      return std::nullopt;
    }
    out += static_cast<char>(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  // Valid UTF-8 only: the id is echoed in the reply.
  try {
    (void)Params(out).dump();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return out;
}

Responder ReplyTo(DaemonState& state, const std::shared_ptr<HttpExchange>& exchange,
                  std::string op) {
  return Responder(std::weak_ptr<ReplyChannel>(exchange), nullptr, std::move(op), &state.metrics);
}

JobIntake HttpIntake(const HttpExchange& exchange) {
  JobIntake intake;
  intake.owner = exchange.owner();
  return intake;
}

bool Has(const Params& body, std::string_view name) {
  auto it = body.find(name);
  return it != body.end() && !it->is_null();
}

Status CheckField(const Params& body, std::string_view name, Kind kind) {
  if (!Has(body, name)) return {};
  if (IsKind(body.at(std::string(name)), kind)) return {};
  return InvalidField(std::string(name), "'" + std::string(name) + "' must be " + KindName(kind) +
                                             ", not " + body.at(std::string(name)).type_name());
}

Status CopyField(const Params& body, std::string_view name, Kind kind, Params& params,
                 std::string_view as) {
  if (Status st = CheckField(body, name, kind); !st.ok()) return st;
  if (Has(body, name)) params[std::string(as.empty() ? name : as)] = body.at(std::string(name));
  return {};
}

}  // namespace medq::daemon::http
