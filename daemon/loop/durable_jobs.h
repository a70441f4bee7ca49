// The loop thread's side of the durable job store (daemon/store/): which
// generate and embed jobs are recorded, their results, and the clients
// waiting for them. Loop thread only; every write goes to the store thread
// (store/store_thread.h) and comes back as a completion.
//
// A job's life in the store:
//   Admit    a new generate or embed request (streaming, or `submit`): its id
//            is reserved, its params are written and fsynced, and only then
//            does it join the scheduler's queue and does its client hear its
//            id. A crash before that point leaves no trace and no reply.
//   Finish   the final reply is written as the job's result: done, failed or
//            cancelled. A job that ends because the daemon is shutting down
//            (NOT_READY or CANCELLED from the drain, not from a client) is
//            left queued: it runs again after the restart, from its start.
//   Forget   deletes the row (and cancels the job when it still runs).
// Results are deleted `result_ttl_s` after they were written (Tick).
// Without a store (state_dir "none") nothing is recorded and the status ops
// answer NOT_READY.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/messages.h"
#include "common/protocol.h"
#include "daemon/loop/responder.h"
#include "daemon/loop/scheduler.h"
#include "daemon/store/store_thread.h"

namespace medq::daemon {

// How a generate or embed request reached the daemon.
struct JobIntake {
  std::string owner;  // who may read the job back: "uid:N" or "http"
  // A job read back from the store, running again after a restart: it is
  // already recorded (and is queued past max_queue: it was accepted before).
  std::optional<uint64_t> replay_id;
  // When a replayed job was first accepted (seconds since the epoch): its
  // timeout_s counts from then, not from the restart.
  std::optional<double> accepted_at;
  // No client waits on the job's stream (submit, replay): it is not
  // cancelled when a connection closes.
  bool detached = false;
  // Called once the job is recorded and queued, with its id and the reply
  // its op was given (submit answers through it; its later events are then
  // dropped).
  std::function<void(const std::string& job, Responder& reply)> accepted;
};

class DurableJobs {
 public:
  DurableJobs(Scheduler& scheduler, double result_ttl_s);
  ~DurableJobs();

  // Starts recording in `store` (opened by the caller, before the loop
  // serves anyone): reads its largest id, so that the scheduler's ids go on
  // from there, and the jobs to run again (TakeUnfinished); then hands the
  // store to its thread.
  Status Attach(uv_loop_t* loop, std::unique_ptr<store::JobStore> store);
  bool enabled() const { return thread_ != nullptr; }
  // Loop thread, at shutdown: the writes already posted finish.
  void Stop();

  // Records a new job (see the header) and calls `next` with its id, or
  // with why it was not accepted: QUEUE_FULL when its class has no room, the
  // store's error (a full disk is NOT_READY). Without a store, `next` gets an
  // empty id at once and the scheduler numbers the job; so does a streaming
  // request (not detached) when the disk is full: it runs unrecorded.
  void Admit(store::JobOp op, JobClass cls, Priority priority, const Params& params,
             const JobIntake& intake, std::function<void(Result<std::string>)> next);
  // A job read back from the store is about to run again; `channel` (which
  // records what its op answers before it is queued) lives as long as it.
  void BeginReplay(const std::string& job, const std::string& owner,
                   std::shared_ptr<ReplyChannel> channel);
  // The job's client went away (not in the drain): if it ends cancelled,
  // that is its result.
  void CancelRequested(const std::string& job);
  // True when `job` is a recorded job that has not finished in this process.
  bool IsLive(const std::string& job) const;
  // The owner of a recorded job that has not finished in this process.
  std::optional<std::string> LiveOwner(const std::string& job) const;
  // The cancel op on a recorded job: its cancellation is written as its
  // result first (so that it stays cancelled across a crash), then `done`
  // runs (the caller stops the job and answers).
  void Cancel(const std::string& job, std::function<void(Status)> done);
  // The job's final reply: the done fields (with the whole text) or result,
  // or its error. A no-op for a job that is not recorded (empty `job`).
  // A job past its deadline (TIMEOUT) is recorded `timed_out`, with what it
  // produced as `partial` when given.
  void Finish(const std::string& job, Result<nlohmann::json> outcome, bool draining,
              nlohmann::json partial = nullptr);

  // The status, result and forget ops (docs/protocol.md).
  void StatusOf(const std::string& job, const std::string& owner, Responder reply);
  void ResultOf(const std::string& job, const std::string& owner, bool wait, Responder reply);
  void Forget(const std::string& job, const std::string& owner, Responder reply);

  // Deletes expired results now and then; call periodically.
  void Tick();
  // For health: counts and size of the store, as of its last write.
  StoreInfo Info() const;
  // Jobs to run again, read at Attach; taken once.
  std::vector<store::UnfinishedJob> TakeUnfinished() { return std::move(unfinished_); }

  // Testing: the store's next write kills the daemon before it commits.
  void ArmKillInWrite();

 private:
  // A recorded job that has not finished in this process.
  struct Live {
    std::string owner;
    bool cancel_requested = false;
    bool finishing = false;  // its result is being written
    // Set while finishing; shared, read-only, with the store thread's write.
    std::shared_ptr<const nlohmann::json> result;
    std::vector<std::shared_ptr<Responder>> waiters;  // result --wait
    std::shared_ptr<ReplyChannel> replay_channel;     // a replayed job's
  };

  void AnswerWaiters(Live& live, const nlohmann::json& reply);
  // Reads `job` from the store and calls `next` with it when `owner` may
  // read it; answers `reply` itself otherwise (no store, no such job, an
  // error of the store). With `lost_too`, a job lost to damage of the store
  // is answered as such (status, result); else it is "no job" (forget).
  void ReadOwned(const std::string& job, const std::string& owner, Responder reply,
                 std::function<void(std::shared_ptr<Responder>, const store::StoredJob&)> next,
                 bool lost_too = false);
  void Refresh(const store::StoreStats& stats);
  // After a write: a full disk (NOT_READY from the store) shows in health
  // until a write succeeds.
  void NoteWrite(const Status& written);
  // `job` as a store id; INVALID_REQUEST naming it otherwise.
  static Result<uint64_t> IdOf(const std::string& job);
  static bool MayRead(const std::string& owner, const std::string& who);

  Scheduler& scheduler_;
  double result_ttl_s_;
  std::unique_ptr<store::StoreThread> thread_;
  std::map<std::string, Live> live_;
  std::vector<store::UnfinishedJob> unfinished_;
  // Rows found damaged (status, result), until forgotten: health counts them.
  std::set<std::string> damaged_;
  StoreInfo info_;
  std::chrono::steady_clock::time_point last_sweep_{};
};

}  // namespace medq::daemon
