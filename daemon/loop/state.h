// What the ops see of the daemon. Owned by the Server; loop thread only,
// except where a member says otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/messages.h"
#include "daemon/config.h"
#include "daemon/loop/job_queue.h"
#include "daemon/loop/metrics.h"
#include "daemon/model_resolver.h"
#include "daemon/worker/worker.h"

namespace medq::daemon {

class ModelStore;
class Responder;

// A generation from submission to its final reply. Loop thread only.
struct GenerateSession {
  std::shared_ptr<Responder> reply;
  // Set by the loop (cancel op, client gone, shutdown), read by the worker
  // before each decode step: the one piece of state the two threads share
  // outside the Handoff.
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point started;
  bool first_token_seen = false;
};

struct DaemonState {
  DaemonState(const Config& c, JobQueue& j, Worker& w, ModelStore& m)
      : config(c),
        jobs(j),
        worker(w),
        models(m),
        resolver(c.models_dir, c.allow_model_paths, BuiltinModelsDir()) {}

  const Config& config;
  JobQueue& jobs;
  Worker& worker;
  // Worker thread only: handed to worker closures, never used on the loop.
  ModelStore& models;
  ModelResolver resolver;

  EffectiveLimits limits;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  MemorySnapshot last_memory;                              // as the worker last measured it
  nlohmann::json loaded_models = nlohmann::json::array();  // as the worker last reported
  std::map<std::string, std::shared_ptr<GenerateSession>> sessions;  // running, by job id
  Metrics metrics;
  int connections = 0;
  int consecutive_internal_errors = 0;  // generations failing with INTERNAL in a row
  bool ready = false;                   // the worker has started (and the preload is done)
  bool draining = false;                // SIGTERM received: no new work
  std::vector<std::string> warnings;
};

}  // namespace medq::daemon
