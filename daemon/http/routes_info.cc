// GET /v1/models and /v1/models/{id} (the `models` op), GET /health (the `health` op: 200 when
// ready, else 503) and GET /metrics (the `metrics` op's Prometheus text).
#include "daemon/http/routes.h"

namespace medq::daemon::http {

using nlohmann::json;

void ListModels(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  HttpExchange::Handlers handlers;
  handlers.result = [](HttpExchange& e, const json& result) {
    json data = json::array();
    for (const json& name : result.value("available", json::array())) {
      data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "medq"}});
    }
    e.RespondJson(200, {{"object", "list"}, {"data", std::move(data)}});
  };
  ex->set_handlers(std::move(handlers));
  RunOp(s, "models", Params::object(), ex);
}

void RetrieveModel(DaemonState& s, const HttpRequest& request, std::shared_ptr<HttpExchange> ex) {
  const std::optional<std::string> id = PathParam("/v1/models/", request);
  if (!id) {
    return ex->RespondError(HttpError{404, "invalid_request_error", "model_not_found", "model",
                                      std::nullopt,
                                      "the model id in the path is not a model name"});
  }
  HttpExchange::Handlers handlers;
  handlers.result = [id = *id](HttpExchange& e, const json& result) {
    for (const json& name : result.value("available", json::array())) {
      if (name == id) {
        return e.RespondJson(
            200, {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "medq"}});
      }
    }
    e.RespondError(HttpError{404, "invalid_request_error", "model_not_found", "model", std::nullopt,
                             "The model '" + Echo(id) +
                                 "' does not exist; GET /v1/models lists "
                                 "the models"});
  };
  ex->set_handlers(std::move(handlers));
  RunOp(s, "models", Params::object(), ex);
}

void HealthRoute(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  HttpExchange::Handlers handlers;
  handlers.result = [](HttpExchange& e, const json& result) {
    const bool ready = result.value("ready", false);
    if (!ready) e.AddHeader("retry-after", "1");
    e.RespondJson(ready ? 200 : 503, result);
  };
  ex->set_handlers(std::move(handlers));
  RunOp(s, "health", Params::object(), ex);
}

void MetricsRoute(DaemonState& s, const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
  HttpExchange::Handlers handlers;
  handlers.result = [](HttpExchange& e, const json& result) {
    e.Respond(200, "text/plain; version=0.0.4; charset=utf-8", result.value("text", ""));
  };
  ex->set_handlers(std::move(handlers));
  RunOp(s, "metrics", Params::object(), ex);
}

}  // namespace medq::daemon::http
