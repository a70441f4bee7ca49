#include "daemon/loop/durable_jobs.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "common/elapsed.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
using store::JobState;

constexpr double kSweepEveryS = 60;

json ErrorJson(const Error& e) {
  json j = {{"code", ErrorCodeName(e.code)}, {"message", e.message}};
  if (e.retry_after_s) j["retry_after_s"] = *e.retry_after_s;
  return j;
}

Error UnknownJob(const std::string& job) {
  return Error(ErrorCode::kInvalidRequest,
               "no job \"" + Echo(job) +
                   "\": it was never accepted, was forgotten, or its result " +
                   "expired (result_ttl_s)");
}

// A job whose record damage took (docs/protocol.md, "Durable jobs").
json LostReply(const std::string& job, const store::LostJob& lost) {
  return {{"job", job},
          {"state", "lost"},
          {"lost_at", lost.at},
          {"error", ErrorJson(Error(ErrorCode::kInternal,
                                    "job " + job + " was accepted, but its record was lost: " +
                                        lost.why + "; run it again"))}};
}

// A job whose row does not decode: it can be forgotten.
json DamagedReply(const std::string& job, const store::StoredJob& stored) {
  return {
      {"job", job},
      {"state", "damaged"},
      {"error", ErrorJson(Error(ErrorCode::kInternal,
                                "the stored record of job " + job + " is damaged (" +
                                    stored.damage + "); its result cannot be read: forget it"))}};
}

Error NoStore() {
  return Error(ErrorCode::kNotReady,
               "this daemon keeps no job store (state_dir is \"none\"): jobs are not recorded");
}

}  // namespace

DurableJobs::DurableJobs(Scheduler& scheduler, double result_ttl_s)
    : scheduler_(scheduler), result_ttl_s_(result_ttl_s) {}

DurableJobs::~DurableJobs() {
  Stop();
}

Status DurableJobs::Attach(uv_loop_t* loop, std::unique_ptr<store::JobStore> store) {
  auto max_id = store->MaxId();
  if (!max_id.ok()) return max_id.error();
  auto unfinished = store->Unfinished();
  if (!unfinished.ok()) return unfinished.error();
  scheduler_.set_next_id(*max_id + 1);
  unfinished_ = std::move(*unfinished);
  info_.enabled = true;
  info_.path = store->path().string();
  Refresh(store->Stats());
  thread_ = std::make_unique<store::StoreThread>(loop, std::move(store));
  return Status::Ok();
}

void DurableJobs::Stop() {
  if (thread_ != nullptr) thread_->Stop();
}

void DurableJobs::Refresh(const store::StoreStats& stats) {
  info_.bytes = stats.bytes;
  info_.queued = stats.queued;
  info_.done = stats.done;
  info_.failed = stats.failed;
  info_.cancelled = stats.cancelled;
  info_.timed_out = stats.timed_out;
  info_.lost = stats.lost;
}

void DurableJobs::NoteWrite(const Status& written) {
  if (written.ok()) {
    info_.disk_full = false;
  } else if (written.error().code == ErrorCode::kNotReady) {
    info_.disk_full = true;
  }
}

StoreInfo DurableJobs::Info() const {
  StoreInfo info = info_;
  info.damaged = static_cast<int64_t>(damaged_.size());
  return info;
}

Result<uint64_t> DurableJobs::IdOf(const std::string& job) {
  auto id = store::ParseJobId(job);
  if (!id) return UnknownJob(job);
  return *id;
}

// The daemon's own user (and root, for an operator) may read every job; a
// client only its own.
bool DurableJobs::MayRead(const std::string& owner, const std::string& who) {
  return MayActOnJob(owner, who);
}

std::optional<std::string> DurableJobs::LiveOwner(const std::string& job) const {
  auto it = live_.find(job);
  if (it == live_.end()) return std::nullopt;
  return it->second.owner;
}

void DurableJobs::Admit(store::JobOp op, JobClass cls, Priority priority, const Params& params,
                        const JobIntake& intake, std::function<void(Result<std::string>)> next) {
  if (!enabled()) return next(std::string());
  if (intake.replay_id) return next(store::FormatJobId(*intake.replay_id));  // BeginReplay
  if (Status room = scheduler_.CheckRoom(cls); !room.ok()) return next(room.error());
  const std::string job = scheduler_.TakeId();
  const std::optional<uint64_t> id = store::ParseJobId(job);
  if (!id) {
    // Only a store whose largest id is at SQLite's largest integer (a
    // damaged one) gets here: no id is left to give.
    spdlog::error("job store: no job id left to give after {}", job);
    return next(Error(ErrorCode::kInternal,
                      "the job store has no job id left to give (its largest id is at the "
                      "limit); move the state directory's jobs.db aside"));
  }
  store::NewJob row;
  row.id = *id;
  row.op = op;
  row.priority = static_cast<int>(priority);
  row.params = params.dump(-1, ' ', false, Params::error_handler_t::replace);
  row.owner = intake.owner;
  row.created_at = EpochSeconds();
  thread_->Run<store::StoreStats>(
      [row = std::move(row)](store::JobStore& db) -> Result<store::StoreStats> {
        if (Status st = db.Insert(row); !st.ok()) return st.error();
        return db.Stats();
      },
      [this, job, owner = intake.owner, detached = intake.detached,
       next = std::move(next)](Result<store::StoreStats> stats) {
        NoteWrite(stats.ok() ? medq::Status::Ok() : medq::Status(stats.error()));
        if (!stats.ok() && !detached && stats.error().code == ErrorCode::kNotReady) {
          // A full disk: a client that waits on its stream is served all the
          // same, unrecorded (it would not survive a restart); only work
          // that exists to be recorded (submit) is refused.
          spdlog::warn("job {}: the job store's disk is full; it runs unrecorded", job);
          return next(std::string());
        }
        if (!stats.ok()) {
          spdlog::error("job {} not accepted: {}", job, stats.error().message);
          return next(stats.error());
        }
        Refresh(*stats);
        live_[job].owner = owner;
        next(job);
      });
}

void DurableJobs::BeginReplay(const std::string& job, const std::string& owner,
                              std::shared_ptr<ReplyChannel> channel) {
  Live& live = live_[job];
  live.owner = owner;
  live.replay_channel = std::move(channel);
}

void DurableJobs::CancelRequested(const std::string& job) {
  if (auto it = live_.find(job); it != live_.end()) it->second.cancel_requested = true;
}

bool DurableJobs::IsLive(const std::string& job) const {
  auto it = live_.find(job);
  return it != live_.end() && !it->second.finishing;
}

void DurableJobs::Cancel(const std::string& job, std::function<void(medq::Status)> done) {
  auto it = live_.find(job);
  if (it == live_.end() || it->second.finishing) return done(medq::Status::Ok());
  Live& live = it->second;
  live.cancel_requested = true;
  live.finishing = true;  // what the job itself reports from now on is not its result
  live.result = std::make_shared<const json>(
      json{{"job", job},
           {"state", "cancelled"},
           {"error", ErrorJson(Error(ErrorCode::kCancelled, "cancelled by a client"))}});
  const double at = EpochSeconds();
  thread_->Run<store::StoreStats>(
      [id = *store::ParseJobId(job),
       text = live.result->dump(-1, ' ', false, json::error_handler_t::replace),
       at](store::JobStore& db) -> Result<store::StoreStats> {
        auto written = db.Finish(id, JobState::kCancelled, text, at);
        if (!written.ok()) return written.error();
        return db.Stats();
      },
      [this, job, done = std::move(done)](Result<store::StoreStats> stats) {
        NoteWrite(stats.ok() ? medq::Status::Ok() : medq::Status(stats.error()));
        if (stats.ok()) Refresh(*stats);
        if (auto found = live_.find(job); found != live_.end()) {
          AnswerWaiters(found->second, *found->second.result);
          live_.erase(found);
        }
        done(stats.ok() ? medq::Status::Ok() : medq::Status(stats.error()));
      });
}

void DurableJobs::Finish(const std::string& job, Result<json> outcome, bool draining,
                         json partial) {
  auto it = live_.find(job);
  if (it == live_.end() || it->second.finishing) return;
  Live& live = it->second;
  JobState state = JobState::kDone;
  json reply = {{"job", job}};
  if (!outcome.ok()) {
    const Error& error = outcome.error();
    const bool shutdown =
        draining && !live.cancel_requested &&
        (error.code == ErrorCode::kNotReady || error.code == ErrorCode::kCancelled);
    if (shutdown) {
      // Stays queued in the store: it runs again after the restart.
      AnswerWaiters(live, {{"job", job}, {"state", "queued"}});
      live_.erase(it);
      return;
    }
    state = error.code == ErrorCode::kCancelled ? JobState::kCancelled
            : error.code == ErrorCode::kTimeout ? JobState::kTimedOut
                                                : JobState::kFailed;
    reply["state"] = store::JobStateName(state);
    reply["error"] = ErrorJson(error);
    if (!partial.is_null()) reply["partial"] = std::move(partial);
  } else {
    reply["state"] = "done";
    reply["result"] = std::move(*outcome);
  }
  live.finishing = true;
  live.result = std::make_shared<const json>(std::move(reply));
  const double at = EpochSeconds();
  // Serialized on the store thread: an embed result can be tens of MB, too
  // much to dump on the loop. The reply is immutable from here on; both
  // threads only read it.
  thread_->Run<store::StoreStats>(
      [id = *store::ParseJobId(job), state, result = live.result,
       at](store::JobStore& db) -> Result<store::StoreStats> {
        const std::string text = result->dump(-1, ' ', false, json::error_handler_t::replace);
        auto written = db.Finish(id, state, text, at);
        if (!written.ok()) return written.error();
        return db.Stats();
      },
      [this, job](Result<store::StoreStats> stats) {
        NoteWrite(stats.ok() ? medq::Status::Ok() : medq::Status(stats.error()));
        if (!stats.ok()) {
          spdlog::error("job {}: its result could not be recorded: {}", job, stats.error().message);
        } else {
          Refresh(*stats);
        }
        auto done = live_.find(job);
        if (done == live_.end()) return;
        AnswerWaiters(done->second, *done->second.result);
        live_.erase(done);
      });
}

void DurableJobs::AnswerWaiters(Live& live, const json& reply) {
  for (auto& waiter : live.waiters)
    waiter->Result(reply);
  live.waiters.clear();
}

void DurableJobs::ReadOwned(
    const std::string& job, const std::string& owner, Responder reply,
    std::function<void(std::shared_ptr<Responder>, const store::StoredJob&)> next, bool lost_too) {
  if (!enabled()) return reply.Fail(NoStore());
  auto id = IdOf(job);
  if (!id.ok()) return reply.Fail(id.error());
  auto shared = std::make_shared<Responder>(std::move(reply));
  struct Found {
    std::optional<store::StoredJob> row;
    std::optional<store::LostJob> lost;
  };
  thread_->Run<Found>(
      [id = *id](store::JobStore& db) -> Result<Found> {
        Found found;
        auto row = db.Get(id);
        if (!row.ok()) return row.error();
        found.row = std::move(*row);
        if (!found.row) {
          auto lost = db.Lost(id);
          if (!lost.ok()) return lost.error();
          found.lost = *lost;
        }
        return found;
      },
      [this, job, owner, shared, lost_too, next = std::move(next)](Result<Found> found) {
        if (!found.ok()) return shared->Fail(found.error());
        if (found->lost) {
          // Its owner is gone with its record; the answer holds nothing of it.
          if (lost_too) return shared->Result(LostReply(job, *found->lost));
          return shared->Fail(UnknownJob(job));
        }
        // Someone else's job does not exist for this client; a damaged row
        // whose owner cannot be read is visible to the privileged users only.
        if (!found->row || !MayRead(found->row->owner, owner)) return shared->Fail(UnknownJob(job));
        if (!found->row->damage.empty()) damaged_.insert(job);
        next(shared, *found->row);
      });
}

void DurableJobs::StatusOf(const std::string& job, const std::string& owner, Responder reply) {
  ReadOwned(
      job, owner, std::move(reply),
      [this, job](std::shared_ptr<Responder> r, const store::StoredJob& stored) {
        if (!stored.damage.empty()) return r->Result(DamagedReply(job, stored));
        json status = {{"job", job},
                       {"op", store::JobOpName(stored.op)},
                       {"priority", PriorityName(static_cast<Priority>(stored.priority))},
                       {"state", store::JobStateName(stored.state)},
                       {"created_at", stored.created_at}};
        if (stored.finished_at) status["finished_at"] = *stored.finished_at;
        if (stored.state == JobState::kQueued) {
          const QueueInfo queue = scheduler_.Describe();
          // Running once it runs: not while the worker holds it back.
          if (scheduler_.IsRunning(job)) status["state"] = "running";
          for (const JobInfo& j : queue.waiting) {
            if (j.job == job) status["position"] = j.position;
          }
        }
        r->Result(status);
      },
      /*lost_too=*/true);
}

void DurableJobs::ResultOf(const std::string& job, const std::string& owner, bool wait,
                           Responder reply) {
  ReadOwned(
      job, owner, std::move(reply),
      [this, job, wait](std::shared_ptr<Responder> r, const store::StoredJob& stored) {
        if (!stored.damage.empty()) return r->Result(DamagedReply(job, stored));
        if (store::IsFinished(stored.state)) return r->Result(stored.result);
        // Unfinished: it runs (or waits) in this process; a finish
        // written meanwhile has answered nobody yet, since live_ holds
        // it until then.
        auto live = live_.find(job);
        if (live == live_.end()) {
          // Recorded but not yet running again (a restart's replay).
          return r->Result({{"job", job}, {"state", "queued"}});
        }
        // Not finished until its result is on disk: a result handed
        // out before that could be followed by another after a crash.
        if (!wait) {
          return r->Result(
              {{"job", job}, {"state", scheduler_.IsRunning(job) ? "running" : "queued"}});
        }
        live->second.waiters.push_back(std::move(r));
      },
      /*lost_too=*/true);
}

void DurableJobs::Forget(const std::string& job, const std::string& owner, Responder reply) {
  ReadOwned(job, owner, std::move(reply),
            [this, job](std::shared_ptr<Responder> shared, const store::StoredJob& stored) {
              const uint64_t id = stored.id;
              if (auto live = live_.find(job); live != live_.end()) {
                live->second.cancel_requested = true;
                scheduler_.Cancel(job);
              }
              thread_->Run<store::StoreStats>(
                  [id](store::JobStore& db) -> Result<store::StoreStats> {
                    auto gone = db.Forget(id);
                    if (!gone.ok()) return gone.error();
                    return db.Stats();
                  },
                  [this, job, shared](Result<store::StoreStats> stats) {
                    NoteWrite(stats.ok() ? medq::Status::Ok() : medq::Status(stats.error()));
                    if (!stats.ok()) return shared->Fail(stats.error());
                    damaged_.erase(job);
                    Refresh(*stats);
                    shared->Result({{"job", job}, {"forgotten", true}});
                  });
            });
}

void DurableJobs::Tick() {
  if (!enabled()) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_sweep_ < std::chrono::duration<double>(std::min(kSweepEveryS, result_ttl_s_))) {
    return;
  }
  last_sweep_ = now;
  thread_->Run<store::StoreStats>(
      [before = EpochSeconds() - result_ttl_s_](store::JobStore& db) -> Result<store::StoreStats> {
        auto deleted = db.DeleteFinishedBefore(before);
        if (!deleted.ok()) return deleted.error();
        if (*deleted > 0) spdlog::info("job store: {} expired result(s) deleted", *deleted);
        return db.Stats();
      },
      [this](Result<store::StoreStats> stats) {
        if (!stats.ok()) return spdlog::error("job store: {}", stats.error().message);
        Refresh(*stats);
      });
}

void DurableJobs::ArmKillInWrite() {
  if (!enabled()) return;
  thread_->Run<bool>(
      [](store::JobStore& db) -> Result<bool> {
        db.ArmKillInWrite();
        return true;
      },
      [](Result<bool>) {});
}

}  // namespace medq::daemon
