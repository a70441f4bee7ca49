// The OpenAI-compatible routes and what they share. Each route is a thin
// translation: it checks the body's fields (a wrong type is 400 naming the
// parameter; a field medq does not read is refused, never ignored), turns
// them into the typed params of the equivalent medq work (the protocol's
// names, checked by the same parser as the socket's op) and calls the same
// typed entry point as the socket's op handler (loop/entry_points.h) with a
// Responder bound to the exchange, so the queue, priorities, limits,
// cancellation and errors are the socket's. The replies come back typed and
// the route renders them. Loop thread only. docs/http.md is the contract.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "daemon/http/http_exchange.h"
#include "daemon/loop/entry_points.h"

namespace medq::daemon::http {

using RouteHandler = void (*)(DaemonState& state, const HttpRequest& request,
                              std::shared_ptr<HttpExchange> exchange);

struct Route {
  std::string_view method;  // GET routes answer HEAD too
  std::string_view path;
  RouteHandler handler;
  // `path` ends in "/" and takes one more segment (the handler reads it with
  // PathParam): GET /v1/models/{id}.
  bool takes_param = false;
};

// The segment of `request`'s path after `prefix` (a takes_param route's
// path), percent-decoded; nullopt when it is empty, holds a "/", or decodes
// to something that is not UTF-8.
std::optional<std::string> PathParam(std::string_view prefix, const HttpRequest& request);

std::span<const Route> Routes();

// Answers `request` on `connection`: its route, or 404 (no such path) or 405
// (with Allow) for a method the path does not take.
void Dispatch(DaemonState& state, HttpConnection& connection, HttpRequest request);

// A Responder whose replies go to `exchange`, counted in the metrics as a
// request of the medq op `op` (as the socket's are).
Responder ReplyTo(DaemonState& state, const std::shared_ptr<HttpExchange>& exchange,
                  std::string op);
// The intake of a job an HTTP client waits for: its owner is the exchange's.
JobIntake HttpIntake(const HttpExchange& exchange);

// Field checks on a body; null counts as absent, as in the OpenAI API.
// Each returns INVALID_REQUEST "'name' must be ..." when the type is wrong.
enum class Kind { kString, kNumber, kInteger, kBoolean, kArray, kObject };
Status CheckField(const Params& body, std::string_view name, Kind kind);
// `name` is present and not null.
bool Has(const Params& body, std::string_view name);
// Copies body[name] into params[as] when present (after CheckField).
Status CopyField(const Params& body, std::string_view name, Kind kind, Params& params,
                 std::string_view as = {});

// The routes (openai_completions.cc, openai_embeddings.cc, routes_info.cc).
void ChatCompletions(DaemonState& state, const HttpRequest& request,
                     std::shared_ptr<HttpExchange> exchange);
void Completions(DaemonState& state, const HttpRequest& request,
                 std::shared_ptr<HttpExchange> exchange);
void Embeddings(DaemonState& state, const HttpRequest& request,
                std::shared_ptr<HttpExchange> exchange);
void RetrieveModel(DaemonState& state, const HttpRequest& request,
                   std::shared_ptr<HttpExchange> exchange);
void ListModels(DaemonState& state, const HttpRequest& request,
                std::shared_ptr<HttpExchange> exchange);
void HealthRoute(DaemonState& state, const HttpRequest& request,
                 std::shared_ptr<HttpExchange> exchange);
void MetricsRoute(DaemonState& state, const HttpRequest& request,
                  std::shared_ptr<HttpExchange> exchange);

}  // namespace medq::daemon::http
