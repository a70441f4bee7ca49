#include "daemon/server/server.h"

#include <spdlog/spdlog.h>

#include <malloc.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "common/protocol.h"
#include "daemon/engine/engine.h"
#include "daemon/logging.h"
#include "daemon/loop/entry_points.h"
#include "daemon/loop/fs_work.h"
#include "daemon/loop/ops.h"
#include "daemon/loop/ops_internal.h"
#include "daemon/loop/systemd.h"
#include "daemon/uv_guard.h"
#include "daemon/worker/memory.h"
#include "daemon/worker/tasks.h"

namespace medq::daemon {
namespace {

using nlohmann::json;

constexpr uint64_t kMemoryRefreshMs = 5000;
constexpr uint64_t kDrainPollMs = 50;
constexpr uint64_t kTickMs = 500;
constexpr uint64_t kForceCloseMs = 2000;  // after shutdown, for clients that never read
// Unread reply bytes (docs/protocol.md, "Unread replies"). A connection
// stops having its requests read past kPauseReadingBytes (a few replies of
// any op but the largest); it is closed when a reply comes while it holds
// more than that plus max_message_bytes (so that one reply as large as a
// request still fits), and all connections together may hold
// kTotalUnreadFactor times that before the largest holders are closed.
constexpr size_t kPauseReadingBytes = size_t{4} << 20;
constexpr size_t kTotalUnreadFactor = 4;
// A connection that held this much unread makes the heap worth trimming
// once it closes.
constexpr size_t kTrimAfterBytes = size_t{1} << 20;

size_t MaxUnreadBytes(const Config& c) {
  return kPauseReadingBytes + static_cast<size_t>(c.max_message_bytes);
}

uv_loop_t* InitLoop(uv_loop_t* loop) {
  uv_loop_init(loop);
  return loop;
}

// The queue bound when the configuration leaves it to us: small GPUs (and
// CPU-only machines, which generate slowly) get short queues.
int DefaultMaxQueue(const MemorySnapshot& memory) {
  constexpr int64_t k8GB = int64_t{8} << 30;
  if (memory.devices.empty()) return 5;
  return memory.devices.front().total_bytes <= k8GB ? 5 : 20;
}

WorkerOptions MakeWorkerOptions(const Config& c) {
  WorkerOptions o;
  o.threads = c.threads;
  o.load = LoadPolicy{c.device, c.dtype, c.gpu_fallback == "cpu", c.max_loaded_models,
                      c.max_concurrent > 1};
  o.load.quantize = c.quantize;
  o.load.quantize_embeddings = c.quantize_embeddings;
  o.generation.budget = BudgetPolicy{c.max_gpu_memory_mb << 20, c.test_fault_injection};
  o.generation.cleanup_after_each = c.cleanup == "after-each";
  o.generation.batch.prefill_chunk_tokens = c.prefill_chunk_tokens;
  o.generation.batch.prefill_budget_tokens = c.prefill_chunk_tokens;
  o.batch_wait = std::chrono::milliseconds(c.batch_wait_ms);
  o.max_concurrent = c.max_concurrent;
  o.embed.limits = BatchLimits{c.embed_max_batch, c.embed_max_padding};
  o.embed.batch_timeout = std::chrono::milliseconds(c.embed_batch_timeout_ms);
  o.embed.cleanup_after_each = c.cleanup == "after-each";
  return o;
}

std::string KnownOps() {
  std::string names;
  for (const OpSpec& op : Ops())
    names += (names.empty() ? "" : ", ") + std::string(op.name);
  return names;
}

}  // namespace

Server::Server(Config config, std::vector<std::string> args)
    : config_(std::move(config)),
      args_(std::move(args)),
      handoff_(InitLoop(&loop_)),
      worker_(handoff_, MakeWorkerOptions(config_)),
      scheduler_(worker_,
                 SchedulerOptions{config_.max_queue > 0 ? config_.max_queue : 5,
                                  config_.max_concurrent, config_.aging_s,
                                  config_.cleanup == "after-each", config_.embed_max_concurrent}),
      jobs_(scheduler_, config_.result_ttl_s),
      state_(config_, &loop_, scheduler_, jobs_),
      peers_(config_.socket_group) {
  write_budget_.limit = kTotalUnreadFactor * MaxUnreadBytes(config_);
  write_budget_.over_limit = [this] {
    // Not from inside the Write that crossed the limit: closing runs close
    // hooks (cancelling jobs), which must not run inside a job's callback.
    if (shed_timer_.loop != nullptr && !uv_is_active(reinterpret_cast<uv_handle_t*>(&shed_timer_)))
      uv_timer_start(
          &shed_timer_,
          [](uv_timer_t* t) {
            GuardCallback("shedding unread replies",
                          [t] { static_cast<Server*>(t->data)->ShedUnreadReplies(); });
          },
          0, 0);
  };
  scheduler_.set_on_report([this](const WorkerReport& report) { CountReport(report); });
  state_.limits.max_queue = scheduler_.max_queue();
  state_.limits.max_concurrent = config_.max_concurrent;
  state_.limits.prefill_chunk_tokens = config_.prefill_chunk_tokens;
  state_.limits.max_connections = config_.max_connections;
  state_.limits.max_message_bytes = config_.max_message_bytes;
  state_.limits.idle_timeout_s = config_.idle_timeout_s;
  state_.limits.queue_timeout_s = config_.queue_timeout_s;
  state_.limits.drain_timeout_s = config_.drain_timeout_s;
  state_.limits.max_gpu_memory_mb = config_.max_gpu_memory_mb;
  state_.limits.embed_max_batch = config_.embed_max_batch;
  state_.limits.embed_batch_timeout_ms = config_.embed_batch_timeout_ms;
  state_.limits.embed_max_concurrent = config_.embed_max_concurrent;
  state_.limits.embed_max_inputs = config_.embed_max_inputs;
}

Server::~Server() {
  if (!stopped_) CloseEverything();
  uv_run(&loop_, UV_RUN_DEFAULT);  // let close callbacks run
  if (uv_loop_close(&loop_) == UV_EBUSY) {
    // Handles left open (an unreferenced timer, a connection whose client
    // never read): close them so that the loop frees everything it holds.
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
}

// Before the socket is served: a store another daemon holds, or one that
// cannot be created, stops the start (exit 69); a damaged or newer one is
// moved aside with a warning, damage the store's mark reveals is reported
// with the ids it took (job_store.h); a store that cannot open for want of
// disk space leaves the daemon serving work that is not recorded.
bool Server::OpenJobStore() {
  if (config_.state_dir == "none") {
    spdlog::warn(
        "state_dir is \"none\": accepted jobs are not recorded and do not survive a "
        "restart");
    return true;
  }
  store::OpenReport report;
  auto store = store::JobStore::Open(config_.state_dir, &report);
  if (!store.ok() && store.error().code == ErrorCode::kNotReady) {
    spdlog::error("job store: {}; serving without it: accepted jobs are not recorded",
                  store.error().message);
    state_.warnings.push_back(
        "job store unavailable (the disk is full): accepted jobs are not recorded and submit "
        "is refused until medqd restarts with free space");
    return true;
  }
  if (!store.ok()) {
    spdlog::critical("{}", store.error().message);
    return false;
  }
  if (!report.damage.empty()) {
    std::string lost = "no job was lost";
    if (report.lost_first != 0) {
      lost = "jobs " + store::FormatJobId(report.lost_first) + " to " +
             store::FormatJobId(report.lost_last) + " were lost (their status says so)";
    }
    spdlog::error("job store damaged: {}; {}; {}", report.damage, lost,
                  report.copied_aside.empty()
                      ? std::string("the damaged file was moved aside")
                      : "the files were copied to " + report.copied_aside.string());
    state_.warnings.push_back("job store damaged: " + report.damage + "; " + lost +
                              "; the other jobs are kept; see the log");
  }
  if (!report.mark_problem.empty()) {
    spdlog::warn("job store: {}", report.mark_problem);
    state_.warnings.push_back("job store: " + report.mark_problem);
  }
  if (!report.moved_aside.empty()) {
    spdlog::error("job store: {} was moved aside because {}; starting with an empty store",
                  report.moved_aside.string(), report.why);
    state_.warnings.push_back("job store was moved aside (" + report.why +
                              "): its jobs are not run again; see the log");
    // (Its ids are still never given again when the store's mark survived.)
  }
  if (Status st = jobs_.Attach(&loop_, std::move(*store)); !st.ok()) {
    spdlog::critical("cannot read the job store: {}", st.error().message);
    return false;
  }
  spdlog::info("job store: {} ({} accepted job(s) to run again)", jobs_.Info().path,
               jobs_.Info().queued);
  return true;
}

int Server::Run() {
  const SystemdSockets systemd = SystemdListenFds();
  if (std::optional<int> fd = systemd.socket) {
    socket_ = ListeningSocket{*fd, "", 0, 0};  // never unlinked by us
    socket_activated_ = true;
  } else {
    auto sock = OpenListeningSocket(config_.socket, config_.socket_group);
    if (!sock.ok()) {
      spdlog::critical("cannot serve {}: {}", config_.socket, sock.error().message);
      CloseEverything();
      return 69;
    }
    socket_ = *sock;
  }
  if (!OpenJobStore()) {
    CloseEverything();
    return 69;
  }
  uv_pipe_init(&loop_, &listener_, 0);
  listener_.data = this;
  uv_pipe_open(&listener_, socket_.fd);
  if (int rc =
          uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), SOMAXCONN, &Server::OnConnection);
      rc != 0) {
    spdlog::critical("cannot listen on {}: {}", config_.socket, uv_strerror(rc));
    CloseEverything();
    return 69;
  }
  listening_ = true;
  if (!config_.http_listen.empty() || systemd.http) {
    http_ = std::make_unique<http::HttpServer>(&loop_, state_, config_, peers_);
    if (Status st = http_->Start(systemd.http); !st.ok()) {
      spdlog::critical("cannot serve HTTP: {}", st.error().message);
      CloseEverything();
      return 69;
    }
  }

  for (auto [handle, signum] :
       {std::pair{&sigterm_, SIGTERM}, {&sigint_, SIGINT}, {&sighup_, SIGHUP}}) {
    uv_signal_init(&loop_, handle);
    handle->data = this;
    uv_signal_start(handle, &Server::OnSignal, signum);
  }
  uv_timer_init(&loop_, &drain_timer_);
  drain_timer_.data = this;
  uv_timer_init(&loop_, &memory_timer_);
  memory_timer_.data = this;

  worker_.Start();
  scheduler_.RunNow<bool>([](Worker&) -> Result<bool> { return true; },
                          [this](Result<bool>) {
                            if (config_.max_queue == 0) {
                              scheduler_.set_max_queue(DefaultMaxQueue(scheduler_.view().memory));
                              state_.limits.max_queue = scheduler_.max_queue();
                            }
                            if (config_.preload.empty()) {
                              MarkReady();
                            } else {
                              Preload();
                            }
                          });
  uv_timer_start(
      &memory_timer_,
      [](uv_timer_t* t) {
        GuardCallback("the memory timer", [t] { static_cast<Server*>(t->data)->RefreshMemory(); });
      },
      kMemoryRefreshMs, kMemoryRefreshMs);

  uv_timer_init(&loop_, &shed_timer_);
  shed_timer_.data = this;
  uv_timer_init(&loop_, &tick_timer_);
  tick_timer_.data = this;
  uv_timer_start(
      &tick_timer_,
      [](uv_timer_t* t) {
        GuardCallback("the tick timer", [t] { static_cast<Server*>(t->data)->Tick(); });
      },
      kTickMs, kTickMs);
  uv_timer_init(&loop_, &watchdog_timer_);
  watchdog_timer_.data = this;
  if (auto interval = WatchdogPingInterval()) {
    watchdog_interval_ = *interval;
    uv_timer_start(
        &watchdog_timer_,
        [](uv_timer_t* t) {
          GuardCallback("the watchdog timer",
                        [t] { static_cast<Server*>(t->data)->PingWatchdog(); });
        },
        0, static_cast<uint64_t>(interval->count()));
  }

  spdlog::info("medqd listening on {}{} (pid {})", config_.socket,
               socket_activated_ ? " (socket from systemd)" : "", getpid());
  uv_run(&loop_, UV_RUN_DEFAULT);
  if (abandoned_fs_work_) {
    // A thread of libuv's file pool is stuck in a system call: the loop
    // cannot close and libuv joins its threads at exit, so exit now. The
    // worker is joined and the job store closed (CloseEverything).
    spdlog::warn("medqd stopped without waiting for {} stuck file-system operation(s)",
                 FsWorkOutstanding());
    spdlog::shutdown();
    _exit(0);
  }
  spdlog::info("medqd stopped");
  return 0;
}

void Server::MarkReady() {
  if (state_.draining) return;
  // The jobs a crash or restart left unfinished are queued first, in their
  // order, before any new client's.
  ReplayJobs(state_, [this] { FinishReady(); });
}

void Server::FinishReady() {
  if (state_.draining) return;
  state_.ready = true;
  const std::string status = "ready: " + std::to_string(scheduler_.view().memory.devices.size()) +
                             " CUDA device(s), max_queue " +
                             std::to_string(scheduler_.max_queue()) + ", max_concurrent " +
                             std::to_string(config_.max_concurrent);
  spdlog::info("{}", status);
  NotifyReady(status);
}

// Loads the preload model as a job; the daemon becomes ready when it is
// loaded and has generated one token, or embedded one text (the warm-up), or
// stays not ready with the reason in `health` when that fails.
void Server::Preload() {
  ResolveModel(state_, config_.preload, "", [this](Result<ResolvedModel> found) {
    if (!found.ok()) {
      spdlog::error("cannot preload {}: {}", config_.preload, found.error().message);
      state_.warnings.push_back("preload failed: " + found.error().message);
      return;
    }
    JobSpec spec;
    spec.cls = JobClass::kModel;
    spec.op = "load";
    spec.priority = Priority::kHigh;
    auto job = scheduler_.Submit<bool>(
        std::move(spec),
        [where = ModelLocation{found->name, found->dir, {}}](Worker& worker) {
          return LoadAndWarmUp(worker, where);
        },
        [this](Result<bool> result) {
          if (!result.ok()) {
            spdlog::error("cannot preload {}: {}", config_.preload, result.error().message);
            state_.warnings.push_back("preload failed: " + result.error().message);
            return;
          }
          MarkReady();
        });
    if (!job.ok()) spdlog::error("cannot queue the preload: {}", job.error().message);
  });
}

// Metrics of what the worker reports with each job.
void Server::CountReport(const WorkerReport& report) {
  if (report.model_load) {
    state_.metrics.ObserveModelLoad(report.model_load->load_ms / 1000);
    if (report.model_load->fell_back_to_cpu) state_.metrics.CountCpuFallback();
  }
  if (report.cleaned_up) state_.metrics.CountCleanup();
  for (const EmbedBatchStats& b : report.embed_batches)
    state_.metrics.ObserveEmbedBatch(b.texts, b.padding, b.forming_s, b.inference_s);
}

// Twice a second: queue timeouts and aging, idle model unloading, and the
// `idle` cleanup policy.
void Server::Tick() {
  if (trim_wanted_) {
    // Replies that clients never read were freed: give the heap back.
    trim_wanted_ = false;
    malloc_trim(0);
  }
  scheduler_.Tick();
  jobs_.Tick();
  const auto now = std::chrono::steady_clock::now();
  if (scheduler_.running() > 0 || scheduler_.waiting() > 0) {
    last_busy_ = now;
    idle_cleanup_done_ = false;
    unload_checked_ = false;
    return;
  }
  const bool unload_idle =
      config_.keep_alive_s > 0 && !unload_checked_ && !scheduler_.view().loaded.empty() &&
      std::chrono::duration<double>(now - last_busy_).count() >= config_.keep_alive_s;
  const bool cleanup = config_.cleanup == "idle" && !idle_cleanup_done_;
  if (!unload_idle && !cleanup) return;
  idle_cleanup_done_ = true;
  unload_checked_ = unload_checked_ || unload_idle;
  const auto keep_alive = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(config_.keep_alive_s));
  scheduler_.RunNow<std::vector<std::string>>(
      [unload_idle, cleanup, keep_alive](Worker& worker) -> Result<std::vector<std::string>> {
        return SweepIdle(worker, unload_idle, cleanup, keep_alive);
      },
      [this](Result<std::vector<std::string>> unloaded) {
        if (!unloaded.ok()) return;
        for (const std::string& name : *unloaded) {
          spdlog::info("unloaded {} after {} s unused (keep_alive_s)", name, config_.keep_alive_s);
        }
      });
}

void Server::OnConnection(uv_stream_t* listener, int status) {
  auto* self = static_cast<Server*>(listener->data);
  if (status < 0) {
    spdlog::warn("accept failed: {}", uv_strerror(status));
    return;
  }
  GuardCallback("accepting a connection", [self] { self->Accept(); });
}

void Server::Accept() {
  const uint64_t id = next_connection_id_++;
  Connection::Limits limits{static_cast<size_t>(config_.max_message_bytes),
                            static_cast<uint64_t>(config_.idle_timeout_s * 1000),
                            kPauseReadingBytes, MaxUnreadBytes(config_), &write_budget_};
  Connection::Callbacks callbacks{
      [this](Connection& c, std::string line) { OnLine(c, std::move(line)); },
      [this](Connection& c) { OnTooLarge(c); },
      [this](Connection& c) {
        if (c.peak_pending_write_bytes() >= kTrimAfterBytes) trim_wanted_ = true;
        connections_.erase(c.id());
        state_.connections = static_cast<int>(connections_.size());
      }};
  auto conn = std::make_shared<Connection>(&loop_, id, limits, std::move(callbacks));
  connections_[id] = conn;
  state_.connections = static_cast<int>(connections_.size());
  if (conn->Accept(reinterpret_cast<uv_stream_t*>(&listener_)) != 0) {
    conn->Close();
    return;
  }
  if (static_cast<int>(connections_.size()) > config_.max_connections) {
    spdlog::warn("refusing connection: {} connections open, max_connections is {}",
                 connections_.size() - 1, config_.max_connections);
    conn->WriteAndClose(EncodeError(
        nullptr, Error(ErrorCode::kNotReady,
                       "Too many connections (" + std::to_string(config_.max_connections) +
                           " open). Try again later.",
                       1.0)));
    return;
  }
  auto peer = PeerOf(conn->fd());
  if (!peer || !peers_.Allows(*peer)) {
    spdlog::warn(
        "refused connection from uid {} pid {}: not root, not this daemon's user, not in "
        "group '{}'; add the user to that group to allow it",
        peer ? std::to_string(peer->uid) : "?", peer ? std::to_string(peer->pid) : "?",
        config_.socket_group);
    conn->WriteAndClose(EncodeError(nullptr, Error(ErrorCode::kPermissionDenied,
                                                   "permission denied: ask an administrator to "
                                                   "add you to the group '" +
                                                       config_.socket_group + "'")));
    return;
  }
  spdlog::debug("connection {} from uid {} pid {}", id, peer->uid, peer->pid);
  conn->set_owner("uid:" + std::to_string(peer->uid));
  conn->StartReading();
}

void Server::ShedUnreadReplies() {
  while (write_budget_.pending > write_budget_.limit) {
    Connection* largest = nullptr;
    for (auto& [id, conn] : connections_) {
      if (conn->closing()) continue;
      if (largest == nullptr || conn->pending_write_bytes() > largest->pending_write_bytes())
        largest = conn.get();
    }
    if (largest == nullptr || largest->pending_write_bytes() == 0) return;
    spdlog::warn(
        "connection {}: closed holding {} unread reply bytes, the most of any connection, while "
        "all held {} (more than {})",
        largest->id(), largest->pending_write_bytes(), write_budget_.pending, write_budget_.limit);
    largest->Close();  // takes its bytes off the budget
  }
}

void Server::OnLine(Connection& conn, std::string line) {
  json id;
  auto request = ParseRequest(line, &id);
  if (!request.ok()) {
    state_.metrics.CountRequest("-", ErrorCodeName(request.error().code));
    conn.Write(EncodeError(id, request.error()));
    return;
  }
  const OpSpec* op = FindOp(request->op);
  if (op == nullptr) {
    state_.metrics.CountRequest("-", "UNKNOWN_OP");
    conn.Write(EncodeError(id, Error(ErrorCode::kUnknownOp, "unknown op \"" + Echo(request->op) +
                                                                "\"; known ops: " + KnownOps())));
    return;
  }
  Responder reply(conn.weak_from_this(), request->id, request->op, &state_.metrics);
  if (op->starts_work) {
    if (Status st = RefuseWhileDraining(state_); !st.ok()) return reply.Fail(st.error());
  }
  try {
    op->handler(state_, *request, std::move(reply));
  } catch (const std::exception& e) {
    // The moved Responder has answered INTERNAL while unwinding.
    spdlog::error("op {} failed with an unexpected exception: {}", request->op, e.what());
  }
}

void Server::OnTooLarge(Connection& conn) {
  spdlog::warn("connection {}: request line over {} bytes; closing it", conn.id(),
               config_.max_message_bytes);
  conn.Write(EncodeError(
      nullptr, Error(ErrorCode::kTooLarge, "request line exceeds the maximum message size (" +
                                               std::to_string(config_.max_message_bytes) +
                                               " bytes); closing the connection")));
  conn.CloseAfterWrites();
}

void Server::OnSignal(uv_signal_t* handle, int signum) {
  auto* self = static_cast<Server*>(handle->data);
  GuardCallback("a signal", [self, signum] {
    if (signum == SIGHUP) {
      self->Reload();
    } else {
      spdlog::info("received {}; draining", signum == SIGTERM ? "SIGTERM" : "SIGINT");
      self->BeginDrain();
    }
  });
}

// SIGHUP: the configuration and the HTTP API keys file are read off the
// loop thread (loop/fs_work.h: a slow or stuck disk must not stop the loop,
// and the read is bounded in time); what they hold is applied on the loop.
void Server::Reload() {
  struct Reloaded {
    ConfigOutcome config;
    std::optional<Result<http::ApiKeys>> keys;  // set when a keys file is
  };
  std::string keys_file = http_ != nullptr ? http_->keys_file() : std::string();
  RunFsWork<Result<Reloaded>>(
      &loop_,
      [args = args_, keys_file = std::move(keys_file)]() -> Result<Reloaded> {
        std::vector<const char*> argv{"medqd"};
        for (const std::string& a : args)
          argv.push_back(a.c_str());
        Reloaded out{LoadConfig(static_cast<int>(argv.size()), argv.data()), std::nullopt};
        if (!keys_file.empty()) out.keys = http::ApiKeys::Read(keys_file);
        return out;
      },
      [this](Result<Reloaded> reloaded) {
        if (!reloaded.ok()) {
          spdlog::warn("SIGHUP: {}; keeping the running configuration", reloaded.error().message);
          return;
        }
        if (reloaded->keys && http_ != nullptr) http_->ReplaceKeys(std::move(*reloaded->keys));
        auto* fresh = std::get_if<Config>(&reloaded->config);
        if (fresh == nullptr) {
          spdlog::warn("SIGHUP: configuration is invalid; keeping the running one");
          return;
        }
        SetLogLevel(fresh->log_level);
        config_.log_level = fresh->log_level;
        spdlog::info("SIGHUP: reloaded log_level = {}; other keys take effect on restart",
                     fresh->log_level);
      });
}

void Server::PingWatchdog() {
  // The loop is alive (this timer fired); ping only if the worker is too.
  if (worker_.Responsive(2 * watchdog_interval_)) {
    NotifyWatchdog();
  } else {
    spdlog::error(
        "worker thread has shown no progress for over {} ms; withholding the "
        "watchdog ping so that systemd restarts the daemon",
        2 * watchdog_interval_.count());
  }
}

void Server::BeginDrain() {
  if (state_.draining) return;
  state_.draining = true;
  NotifyStopping();
  state_.ready = false;
  if (listening_) {
    listening_ = false;
    RemoveListeningSocket(socket_);
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
  }
  if (http_ != nullptr) http_->StopListening();
  scheduler_.DropAllWaiting(
      Error(ErrorCode::kNotReady, "medqd is shutting down; retry once it is back"));
  drain_deadline_ = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(config_.drain_timeout_s * 1000));
  uv_timer_start(
      &drain_timer_,
      [](uv_timer_t* t) {
        GuardCallback("the drain timer", [t] { static_cast<Server*>(t->data)->FinishIfDrained(); });
      },
      0, kDrainPollMs);
}

void Server::FinishIfDrained() {
  const bool idle = scheduler_.running() == 0;
  if (!idle && std::chrono::steady_clock::now() < drain_deadline_) return;
  if (!idle) {
    // Running generations stop within one decode step once cancelled; the
    // worker is joined in CloseEverything.
    spdlog::warn("drain timeout ({} s) passed with {} job(s) running; cancelling them",
                 config_.drain_timeout_s, scheduler_.running());
    scheduler_.CancelAllRunning();
  }
  CloseEverything();
}

void Server::RefreshMemory() {
  if (scheduler_.running() > 0 || scheduler_.waiting() > 0) return;  // the job will report it
  scheduler_.RunNow<bool>([](Worker&) -> Result<bool> { return true; }, [](Result<bool>) {});
}

void Server::CloseEverything() {
  if (stopped_) return;
  stopped_ = true;
  worker_.StopAndJoin();  // lets a running task end; its completion is delivered below
  handoff_.Close();
  jobs_.Stop();  // the results those completions recorded reach the disk
  for (auto& [id, conn] : std::map(connections_))
    conn->CloseAfterWrites();
  if (http_ != nullptr) {
    http_->StopListening();
    http_->CloseConnections(/*now=*/false);
  }
  if (!connections_.empty() || (http_ != nullptr && http_->connections() > 0)) {
    uv_timer_init(&loop_, &force_close_timer_);
    force_close_timer_.data = this;
    uv_timer_start(
        &force_close_timer_,
        [](uv_timer_t* t) {
          GuardCallback("the force-close timer", [t] {
            auto* self = static_cast<Server*>(t->data);
            for (auto& [id, conn] : std::map(self->connections_))
              conn->Close();
            if (self->http_ != nullptr) self->http_->CloseConnections(/*now=*/true);
          });
          uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
        },
        kForceCloseMs, 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&force_close_timer_));
  }
  if (FsWorkOutstanding() > 0) {
    // Work on the file pool keeps the loop running; a stuck one would keep
    // it forever. Wait at most its own bound, then stop the loop.
    uv_timer_init(&loop_, &fs_stop_timer_);
    fs_stop_timer_.data = this;
    uv_timer_start(
        &fs_stop_timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<Server*>(t->data);
          uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
          if (FsWorkOutstanding() == 0) return;
          spdlog::error("{} file-system operation(s) still stuck after {} ms; not waiting for them",
                        FsWorkOutstanding(), kFsWorkTimeoutMs);
          self->abandoned_fs_work_ = true;
          uv_stop(&self->loop_);
        },
        kFsWorkTimeoutMs, 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&fs_stop_timer_));
  }
  auto close_if_open = [](uv_handle_t* h) {
    if (h->loop != nullptr && !uv_is_closing(h)) uv_close(h, nullptr);
  };
  if (listening_) {
    listening_ = false;
    RemoveListeningSocket(socket_);
    close_if_open(reinterpret_cast<uv_handle_t*>(&listener_));
  }
  for (uv_handle_t* h :
       {reinterpret_cast<uv_handle_t*>(&sigterm_), reinterpret_cast<uv_handle_t*>(&sigint_),
        reinterpret_cast<uv_handle_t*>(&sighup_), reinterpret_cast<uv_handle_t*>(&drain_timer_),
        reinterpret_cast<uv_handle_t*>(&memory_timer_),
        reinterpret_cast<uv_handle_t*>(&watchdog_timer_),
        reinterpret_cast<uv_handle_t*>(&tick_timer_),
        reinterpret_cast<uv_handle_t*>(&shed_timer_)}) {
    close_if_open(h);
  }
}

}  // namespace medq::daemon
