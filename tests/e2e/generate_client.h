// Helpers of the end-to-end tests that generate: a generate request's events
// collected up to its final one, the daemon's usual arguments, and waiting
// for the queue to reach a shape.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/raw_client.h"
#include "tests/support/model_repo.h"

namespace medq::test {

// fixtures/models/<model>/reference.json
nlohmann::json Reference(const char* model);

// One generate request's events, the final one last.
struct Run {
  std::vector<nlohmann::json> events;
  const nlohmann::json& final() const { return events.back(); }
  std::string Text() const;          // the token events' text, joined
  std::vector<int32_t> Ids() const;  // the token events' ids (return_ids)
  int Count(const std::string& event) const;
};

// Reads `c`'s events for request `id` up to its final one; REQUIREs each
// within `timeout`.
Run Collect(RawClient& c, const nlohmann::json& id,
            std::chrono::milliseconds timeout = std::chrono::seconds(60));
void SendGenerate(RawClient& c, const nlohmann::json& id, const nlohmann::json& params);
// One generate request on a fresh connection.
Run Generate(const std::string& socket, const nlohmann::json& params);

// --models-dir repo --model tiny-llama --threads 1, plus `extra`.
std::vector<std::string> DaemonArgs(const ModelRepo& repo, std::vector<std::string> extra = {});

// One request on a fresh connection: its final reply (result or error);
// REQUIREs one within `timeout`.
nlohmann::json CallOp(const std::string& socket, const std::string& op,
                      const nlohmann::json& params = nlohmann::json::object(),
                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Waits until `queue` shows `running` running and `waiting` waiting jobs.
void AwaitQueue(const std::string& socket, size_t running, size_t waiting);

// `base` with `extra`'s keys set over it (a request with a field changed).
nlohmann::json With(nlohmann::json base, const nlohmann::json& extra);

}  // namespace medq::test
