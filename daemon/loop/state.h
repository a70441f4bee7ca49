// What the ops see of the daemon. Owned by the Server; loop thread only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <uv.h>

#include "common/messages.h"
#include "daemon/config.h"
#include "daemon/loop/circuit_breaker.h"
#include "daemon/loop/durable_jobs.h"
#include "daemon/loop/loop_faults.h"
#include "daemon/loop/metrics.h"
#include "daemon/loop/scheduler.h"
#include "daemon/model_resolver.h"

namespace medq::daemon {

struct DaemonState {
  DaemonState(const Config& c, uv_loop_t* l, Scheduler& s, DurableJobs& j)
      : config(c),
        loop(l),
        scheduler(s),
        jobs(j),
        resolver(c.models_dir, c.allow_model_paths, BuiltinModelsDir()),
        breaker(std::make_shared<CircuitBreaker>(c.breaker_errors, c.breaker_cooldown_s)) {}

  const Config& config;
  uv_loop_t* loop;  // for filesystem work off the loop thread (loop/fs_work.h)
  // Admits, runs and cancels all work; its view() is the worker's last report
  // (memory, loaded models).
  Scheduler& scheduler;
  // The durable job store's loop side: generate and embed jobs recorded,
  // their results, submit/status/result/forget.
  DurableJobs& jobs;
  // Filesystem reads only; used from libuv's threadpool (loop/fs_work.h).
  const ModelResolver resolver;
  // Pauses a model whose device keeps failing; shared, since the tickets of
  // requests still in flight at shutdown may outlive this state.
  std::shared_ptr<CircuitBreaker> breaker;

  EffectiveLimits limits;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  Metrics metrics;
  LoopFaults faults;         // armed only with --test-fault-injection (inject-fault)
  int connections = 0;       // on the socket
  int http_connections = 0;  // on the HTTP endpoint (daemon/http/)
  bool ready = false;        // the worker has started (and the preload is done)
  bool draining = false;     // SIGTERM received: no new work
  std::vector<std::string> warnings;
};

}  // namespace medq::daemon
