#include "daemon/loop/ops.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/messages.h"
#include "common/params.h"
#include "common/requests.h"
#include "common/version.h"
#include "daemon/engine/fault_injection.h"
#include "daemon/engine/runtime.h"
#include "daemon/loop/ops_internal.h"
#include "daemon/worker/memory.h"
#include "daemon/worker/tasks.h"

namespace medq::daemon {
namespace {

using nlohmann::json;

void Health(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(DescribeHealth(state));
}

void Queue(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(state.scheduler.Describe());
}

void Version(DaemonState&, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(
      VersionInfo{kVersion, kProtocolVersion, engine::TorchVersion(), engine::BuiltWithCuda()});
}

// A high-priority task of the model class: it runs between two steps of the
// running generations, whose memory it cannot free (they trim when the last
// one ends), and empties the caches around them.
void CleanupMemory(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  JobSpec spec;
  spec.cls = JobClass::kModel;
  spec.op = "cleanup-memory";
  spec.priority = Priority::kHigh;
  spec.owner = shared_reply->owner();
  auto job = state.scheduler.Submit<CleanupInfo>(
      std::move(spec), [](Worker&) -> Result<CleanupInfo> { return CleanUpMemory(); },
      [&state, shared_reply](Result<CleanupInfo> result) {
        state.faults.ThrowIfCompletionArmed("cleanup-memory");
        if (!result.ok()) return shared_reply->Fail(result.error());
        spdlog::info("cleanup-memory: RSS {} -> {} bytes", result->before.rss_bytes,
                     result->after.rss_bytes);
        state.metrics.CountCleanup();
        shared_reply->Result(json(*result));
      });
  if (!job.ok()) shared_reply->Fail(job.error());
}

// Testing only (medqd --test-fault-injection): the next model load, merge or decode
// step fails as a CUDA out-of-memory would, or the next completion of a
// cleanup-memory or model-class task throws on the loop thread.
void InjectFault(DaemonState& state, const Request& req, Responder reply) {
  if (!state.config.test_fault_injection) {
    return reply.Fail(Error(ErrorCode::kPermissionDenied,
                            "fault injection is off; start medqd with --test-fault-injection"));
  }
  auto request = ParseInjectFaultRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  const std::string& at = request->at;
  if (at == "store-write") {
    state.jobs.ArmKillInWrite();
    spdlog::warn("fault injection: the job store's next write kills the daemon before it commits");
    return reply.Result({{"armed", at}});
  }
  if (at == "completion") {
    state.faults.ArmCompletionThrow();
    spdlog::warn("fault injection: the next task completion on the loop thread will throw");
    return reply.Result({{"armed", at}});
  }
  if (at == "decode-error") {
    engine::ArmFault(engine::Fault::kDecodeError);
    spdlog::warn("fault injection: the next decode step will fail as a device error");
    return reply.Result({{"armed", at}});
  }
  engine::ArmFault(at == "load"    ? engine::Fault::kLoadOom
                   : at == "merge" ? engine::Fault::kMergeOom
                                   : engine::Fault::kDecodeOom);
  spdlog::warn("fault injection: the next {} will fail with GPU out of memory", at);
  reply.Result({{"armed", at}});
}

void MetricsOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result({{"format", "prometheus-text-0.0.4"}, {"text", RenderMetrics(s)}});
}

constexpr OpSpec kOps[] = {
    {"health", &Health, "Daemon status, readiness, memory, jobs and limits", false},
    {"queue", &Queue, "Running and waiting jobs with positions, and totals", false},
    {"cleanup-memory", &CleanupMemory,
     "Empty the CUDA caching allocator and trim host memory; memory before and after", true},
    {"version", &Version, "Daemon, protocol and LibTorch versions", false},
    {"generate", &GenerateOp, "Generate text from a prompt, streaming tokens", true},
    {"embed", &EmbedOp, "Embed texts with an embedding model, batched with other clients'", true},
    {"cancel", &CancelOp, "Cancel a waiting or running job", false},
    {"submit", &SubmitOp, "Queue a generate or embed job and return its id at once", true},
    {"status", &StatusOp, "A recorded job's state", false},
    {"result", &ResultOp, "A recorded job's result, at once or when it finishes", false},
    {"forget", &ForgetOp, "Delete a recorded job and its result (cancelling it if it runs)", false},
    {"models", &ModelsOp, "Available and loaded models", false},
    {"load", &LoadOp, "Load a model (and adapter) now", true},
    {"unload", &UnloadOp, "Unload a loaded model", true},
    {"tokenize", &TokenizeOp, "Token ids and strings of a text", true},
    {"detokenize", &DetokenizeOp, "Text of token ids", true},
    {"apply-template", &ApplyTemplateOp, "Render a conversation with the chat template", true},
    {"metrics", &MetricsOp, "Prometheus text exposition of counters and histograms", false},
    {"inject-fault", &InjectFault,
     "Testing only: fail the next load, merge or decode step (OOM or a device error), or throw "
     "in a completion",
     false},
};

}  // namespace

Result<std::shared_ptr<CircuitBreaker::Ticket>> AdmitToModel(DaemonState& state,
                                                             const JobIntake& intake,
                                                             const std::string& model) {
  if (intake.replay_id) {
    return std::make_shared<CircuitBreaker::Ticket>(state.breaker, model, false);
  }
  return state.breaker->Admit(model);
}

void SettleTicket(CircuitBreaker::Ticket* ticket, const Error* error, bool completed) {
  if (ticket == nullptr) return;
  if (error != nullptr && error->code == ErrorCode::kInternal) {
    return ticket->Settle(CircuitBreaker::Outcome::kDeviceError, error->message);
  }
  ticket->Settle(error == nullptr && completed ? CircuitBreaker::Outcome::kSuccess
                                               : CircuitBreaker::Outcome::kOther);
}

Status RefuseWhileDraining(const DaemonState& state) {
  if (!state.draining) return Status::Ok();
  return Error(ErrorCode::kNotReady, "medqd is shutting down; retry once it is back", 1.0);
}

HealthInfo DescribeHealth(const DaemonState& s) {
  HealthInfo h;
  h.ready = s.ready && !s.draining;
  h.version = kVersion;
  h.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  h.pid = getpid();
  const WorkerView& worker = s.scheduler.view();
  h.cuda_available = !worker.memory.devices.empty();
  h.loaded_models = worker.loaded;
  h.memory = worker.memory;
  h.memory.rss_bytes = ResidentSetBytes();  // fresh: cheap to read on this thread
  h.active_jobs = s.scheduler.running();
  h.queue_length = s.scheduler.waiting();
  h.connections = s.connections + s.http_connections;
  h.warnings = s.warnings;
  for (const LoadedModelInfo& m : h.loaded_models) {
    if (m.fell_back_to_cpu) {
      h.warnings.push_back("model " + m.name +
                           " runs on the CPU: the GPU ran out of memory while loading it");
    }
  }
  h.breakers = s.breaker->Describe(std::chrono::steady_clock::now());
  for (const BreakerInfo& b : h.breakers) {
    if (b.state == "closed") continue;
    h.warnings.push_back("model " + b.model + " is paused by its circuit breaker (" + b.state +
                         ") after " + std::to_string(b.consecutive_errors) +
                         " device errors in a row; last: " + b.last_error);
  }
  if (!worker.decode_graph_failure.empty()) {
    h.warnings.push_back("CUDA graphs are off, decode steps run eagerly (slower): " +
                         worker.decode_graph_failure);
  }
  h.store = s.jobs.Info();
  if (h.store.disk_full) {
    h.warnings.push_back(
        "job store: the disk is full; new jobs are refused until space is freed (forget jobs, "
        "or free space in the state directory)");
  }
  if (h.store.damaged > 0) {
    h.warnings.push_back("job store: " + std::to_string(h.store.damaged) +
                         " damaged job record(s) found; their status says which: forget them");
  }
  h.status = s.draining           ? "draining"
             : !s.ready           ? "starting"
             : h.warnings.empty() ? "ok"
                                  : "degraded";
  // Notes that leave the status as it is: a model chatted with through the
  // fallback template works as documented.
  for (const LoadedModelInfo& m : h.loaded_models) {
    if (m.kind == "generation" && m.has_tokenizer && !m.has_chat_template) {
      h.warnings.push_back("model " + m.name +
                           " has no chat template; chat uses the fallback template (ChatML)");
    }
  }
  h.limits = s.limits;
  return h;
}

std::string RenderMetrics(const DaemonState& s) {
  Metrics::Gauges g;
  g.queue_length = s.scheduler.waiting();
  g.running_jobs = s.scheduler.running();
  g.connections = s.connections + s.http_connections;
  g.loaded_models = static_cast<int>(s.scheduler.view().loaded.size());
  g.rss_bytes = ResidentSetBytes();
  g.ready = s.ready && !s.draining;
  g.embed_waiting = s.scheduler.waiting(JobClass::kEmbed);
  g.embed_pending_texts = s.scheduler.pending_embed_texts();
  g.embed_in_flight = s.scheduler.embed_batches_in_flight();
  g.store = s.jobs.Info();
  for (const DeviceMemoryInfo& d : s.scheduler.view().memory.devices) {
    g.device_bytes.push_back({d.index, {d.allocated_bytes, d.reserved_bytes}});
  }
  return s.metrics.Render(g);
}

std::span<const OpSpec> Ops() {
  return kOps;
}

const OpSpec* FindOp(std::string_view name) {
  for (const OpSpec& op : kOps) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace medq::daemon
