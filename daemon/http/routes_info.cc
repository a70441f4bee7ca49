// GET /v1/models and /v1/models/{id} (the models directories' listing, as
// the `models` op's `available`), GET /health (DescribeHealth: 200 when
// ready, else 503) and GET /metrics (RenderMetrics' Prometheus text): the
// typed entry points of loop/entry_points.h, rendered here.
#include "daemon/http/routes.h"

#include <algorithm>

#include "daemon/model_resolver.h"

namespace medq::daemon::http {
namespace {

using nlohmann::json;

// Counted in the metrics as the socket's op `op` is.
template <typename T>
void Count(DaemonState& s, std::string_view op, const Result<T>& outcome) {
  s.metrics.CountRequest(op, outcome.ok() ? "ok" : ErrorCodeName(outcome.error().code));
}

json ModelObject(const std::string& id) {
  return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "medq"}};
}

}  // namespace

void ListModels(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  ListAvailableModels(s, [&s, ex](Result<std::vector<std::string>> available) {
    Count(s, "models", available);
    if (!available.ok()) return ex->RespondError(available.error());
    json data = json::array();
    for (const std::string& name : *available)
      data.push_back(ModelObject(name));
    ex->RespondJson(200, {{"object", "list"}, {"data", std::move(data)}});
  });
}

void RetrieveModel(DaemonState& s, const HttpRequest& request, std::shared_ptr<HttpExchange> ex) {
  const std::optional<std::string> id = PathParam("/v1/models/", request);
  if (!id) {
    return ex->RespondError(HttpError{404, "invalid_request_error", "model_not_found", "model",
                                      std::nullopt,
                                      "the model id in the path is not a model name"});
  }
  ListAvailableModels(s, [&s, ex, id = *id](Result<std::vector<std::string>> available) {
    Count(s, "models", available);
    if (!available.ok()) return ex->RespondError(available.error());
    // "qwen:int4" names the folder "qwen" loaded in 4 bits (model_resolver.h):
    // it exists where the folder does, as every route that takes it agrees.
    const Result<ModelName> name = SplitModelName(id);
    if (name.ok() &&
        std::find(available->begin(), available->end(), name->folder) != available->end()) {
      return ex->RespondJson(200, ModelObject(id));
    }
    ex->RespondError(
        HttpError{404, "invalid_request_error", "model_not_found", "model", std::nullopt,
                  "The model '" + Echo(id) + "' does not exist; GET /v1/models lists the models"});
  });
}

void HealthRoute(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  const HealthInfo health = DescribeHealth(s);
  s.metrics.CountRequest("health", "ok");
  if (!health.ready) ex->AddHeader("retry-after", "1");
  ex->RespondJson(health.ready ? 200 : 503, health);
}

void MetricsRoute(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  s.metrics.CountRequest("metrics", "ok");
  ex->Respond(200, "text/plain; version=0.0.4; charset=utf-8", RenderMetrics(s));
}

}  // namespace medq::daemon::http
