#include "daemon/loop/ops.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/messages.h"
#include "common/params.h"
#include "common/version.h"
#include "daemon/engine/fault_injection.h"
#include "daemon/engine/runtime.h"
#include "daemon/worker/memory.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;

HealthInfo DescribeHealth(const DaemonState& s) {
  HealthInfo h;
  h.ready = s.ready && !s.draining;
  h.version = kVersion;
  h.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
  h.pid = getpid();
  h.cuda_available = !s.last_memory.devices.empty();
  h.loaded_models = s.loaded_models.get<std::vector<LoadedModelInfo>>();
  h.memory = s.last_memory;
  h.memory.rss_bytes = ResidentSetBytes();  // fresh: cheap to read on this thread
  h.active_jobs = s.jobs.running();
  h.queue_length = s.jobs.waiting();
  h.connections = s.connections;
  h.warnings = s.warnings;
  for (const LoadedModelInfo& m : h.loaded_models) {
    if (m.fell_back_to_cpu) {
      h.warnings.push_back("model " + m.name +
                           " runs on the CPU: the GPU ran out of memory while loading it");
    }
  }
  h.status = s.draining           ? "draining"
             : !s.ready           ? "starting"
             : h.warnings.empty() ? "ok"
                                  : "degraded";
  h.limits = s.limits;
  return h;
}

void Health(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(DescribeHealth(state));
}

void Queue(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(state.jobs.Describe());
}

void Version(DaemonState&, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result(
      VersionInfo{kVersion, kProtocolVersion, engine::TorchVersion(), engine::BuiltWithCuda()});
}

// Queued like any worker job (high priority): it waits for a running
// generation to end rather than racing it for the allocator.
void CleanupMemory(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  auto start = [&state, shared_reply](const std::string& job_id) {
    state.worker.Submit(
        []() -> Result<json> {
          const auto t0 = std::chrono::steady_clock::now();
          CleanupInfo info;
          info.before = TakeMemorySnapshot();
          ReleaseCachedMemory();
          info.after = TakeMemorySnapshot();
          info.duration_ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
          return json(info);
        },
        [&state, shared_reply, job_id](Result<json> result) {
          if (result.ok()) {
            state.last_memory = result->at("after").get<MemorySnapshot>();
            spdlog::info("cleanup-memory: RSS {} -> {} bytes",
                         result->at("before").value("rss_bytes", 0), state.last_memory.rss_bytes);
            state.metrics.CountCleanup();
            shared_reply->Result(*result);
          } else {
            shared_reply->Fail(result.error());
          }
          state.jobs.Finish(
              job_id, result.ok() ? JobQueue::Outcome::kCompleted : JobQueue::Outcome::kFailed);
        });
  };
  auto drop = [shared_reply](const Error& why) { shared_reply->Fail(why); };
  auto job = state.jobs.Submit("cleanup-memory", Priority::kHigh, start, drop);
  if (!job.ok()) shared_reply->Fail(job.error());
}

// Testing only (medqd --test-fault-injection): the next model load, merge or decode
// step fails as a CUDA out-of-memory would.
void InjectFault(DaemonState& state, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"at"}); !st.ok()) return reply.Fail(st.error());
  if (!state.config.test_fault_injection) {
    return reply.Fail(Error(ErrorCode::kPermissionDenied,
                            "fault injection is off; start medqd with --test-fault-injection"));
  }
  std::string at;
  if (Status st = ReadString(req.params, "at", at); !st.ok()) return reply.Fail(st.error());
  if (at == "load") {
    engine::ArmFault(engine::Fault::kLoadOom);
  } else if (at == "decode") {
    engine::ArmFault(engine::Fault::kDecodeOom);
  } else if (at == "merge") {
    engine::ArmFault(engine::Fault::kMergeOom);
  } else {
    return reply.Fail(
        Error(ErrorCode::kInvalidRequest, "params.at must be \"load\", \"merge\" or \"decode\""));
  }
  spdlog::warn("fault injection: the next {} will fail with GPU out of memory", at);
  reply.Result({{"armed", at}});
}

void MetricsOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  Metrics::Gauges g;
  g.queue_length = s.jobs.waiting();
  g.running_jobs = s.jobs.running();
  g.connections = s.connections;
  g.loaded_models = static_cast<int>(s.loaded_models.size());
  g.rss_bytes = ResidentSetBytes();
  g.ready = s.ready && !s.draining;
  for (const DeviceMemoryInfo& d : s.last_memory.devices) {
    g.device_bytes.push_back({d.index, {d.allocated_bytes, d.reserved_bytes}});
  }
  reply.Result({{"format", "prometheus-text-0.0.4"}, {"text", s.metrics.Render(g)}});
}

constexpr OpSpec kOps[] = {
    {"health", &Health, "Daemon status, readiness, memory, jobs and limits", false},
    {"queue", &Queue, "Running and waiting jobs with positions, and totals", false},
    {"cleanup-memory", &CleanupMemory,
     "Empty the CUDA caching allocator and trim host memory; memory before and after", true},
    {"version", &Version, "Daemon, protocol and LibTorch versions", false},
    {"generate", &GenerateOp, "Generate text from a prompt, streaming tokens", true},
    {"cancel", &CancelOp, "Cancel a waiting or running job", false},
    {"models", &ModelsOp, "Available and loaded models", false},
    {"load", &LoadOp, "Load a model (and adapter) now", true},
    {"unload", &UnloadOp, "Unload a loaded model", true},
    {"tokenize", &TokenizeOp, "Token ids and strings of a text", true},
    {"detokenize", &DetokenizeOp, "Text of token ids", true},
    {"apply-template", &ApplyTemplateOp, "Render a conversation with the chat template", true},
    {"metrics", &MetricsOp, "Prometheus text exposition of counters and histograms", false},
    {"inject-fault", &InjectFault, "Testing only: fail the next load, merge or decode step (OOM)",
     false},
};

}  // namespace

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
