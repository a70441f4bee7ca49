// What the ops see of the daemon. Owned by the Server; loop thread only.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/messages.h"
#include "daemon/config.h"
#include "daemon/job_queue.h"
#include "daemon/worker.h"

namespace medq::daemon {

struct DaemonState {
  DaemonState(const Config& c, JobQueue& j, Worker& w) : config(c), jobs(j), worker(w) {}

  const Config& config;
  JobQueue& jobs;
  Worker& worker;
  EffectiveLimits limits;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  MemorySnapshot last_memory;  // as the worker last measured it
  int connections = 0;
  bool ready = false;     // the worker has started and measured the devices
  bool draining = false;  // SIGTERM received: no new work
  std::vector<std::string> warnings;
};

}  // namespace medq::daemon
