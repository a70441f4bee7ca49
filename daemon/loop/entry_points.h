// The daemon's work as typed entry points, the one way into it for every
// edge: the socket's op handlers (ops_*.cc) call them with the params they
// parsed, the HTTP routes (daemon/http/) with the params they translated
// from an OpenAI body. Queue, priorities, limits, cancellation, durable jobs
// and errors are therefore the same whichever edge a request came by; the
// replies go to the Responder as typed values (reply_channel.h). Loop thread
// only; none blocks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/generate_params.h"
#include "common/messages.h"
#include "common/requests.h"
#include "common/result.h"
#include "daemon/loop/durable_jobs.h"
#include "daemon/loop/responder.h"
#include "daemon/loop/state.h"

namespace medq::daemon {

// NOT_READY (retry after 1 s) while the daemon drains: every request that
// would start work is refused with it, on every edge.
Status RefuseWhileDraining(const DaemonState& state);

// A generation from its params, whichever way it came (generate, submit, a
// restart's replay, an HTTP route: `intake` says); its events and its end
// go to `reply`. The params are recorded with the job in their JSON form
// (ToJson).
void StartGenerateJob(DaemonState& state, GenerateParams params, Responder reply, JobIntake intake);

// An embed request, as StartGenerateJob; its vectors go to `reply`.
void StartEmbedJob(DaemonState& state, EmbedRequest request, Responder reply, JobIntake intake);

// The daemon's health (the `health` op's result).
HealthInfo DescribeHealth(const DaemonState& state);

// The Prometheus text exposition of the daemon's metrics (the `metrics` op).
std::string RenderMetrics(const DaemonState& state);

// The names of the models in the models directories, listed off the loop
// thread (loop/fs_work.h); `done` runs on the loop thread.
void ListAvailableModels(DaemonState& state,
                         std::function<void(Result<std::vector<std::string>>)> done);

}  // namespace medq::daemon
