// How long a job submitted now can expect to wait: the retry hint of
// QUEUE_FULL and QUEUE_TIMEOUT (`retry_after_s`, HTTP's Retry-After) and the
// `estimated_wait_s` of `queued` events. Loop thread only: each JobQueue owns
// one and feeds it what its jobs did.
//
// A generation's work is counted in tokens: the wait is the tokens still to
// run ahead of the request (the waiting jobs' max_tokens, the running jobs'
// max_tokens less what they have produced) over the measured decode rate
// times the slots that decode at once. The rate is a moving average of the
// finished generations' own rates (tokens after the first over the time
// from the first token to the last); until one has finished, the running
// generations' rates so far, and kDefaultTokensPerS before any token. Work without tokens (model
// and embed jobs) counts the moving average of its jobs' run times instead (1 s until one is
// measured).
#pragma once

#include <cstdint>

namespace medq::daemon {

// The decode rate assumed before any generation has been measured: a
// laptop GPU's 1-3B model, or a CPU's small model, decodes faster; a slow
// start errs towards a later retry.
inline constexpr double kDefaultTokensPerS = 20;
// A retry hint is at least this many seconds (HTTP's Retry-After counts in
// whole seconds) ...
inline constexpr double kMinRetryAfterS = 1;
// ... and at most this many: past it an estimate means little, and a client
// told to wait longer is better off trying elsewhere (the queue wait is
// capped by queue_timeout_s, 300 s by default, anyway).
inline constexpr double kMaxRetryAfterS = 300;

class WaitEstimator {
 public:
  // A finished generation produced `tokens` tokens, the first of them
  // `decode_s` seconds before the last. Ignored when it says nothing about a
  // rate (fewer than two tokens, no time).
  void ObserveDecode(int64_t tokens, double decode_s);
  // A job without tokens ran for `seconds`.
  void ObserveRun(double seconds);

  // The decode rate of one generation, tokens a second: measured; else
  // `live`, the running generations' rate so far, when above 0; else
  // kDefaultTokensPerS.
  double tokens_per_s(double live = 0) const {
    return tokens_per_s_ > 0 ? tokens_per_s_ : live > 0 ? live : kDefaultTokensPerS;
  }
  // The run time of a job without tokens: measured, or 1 s.
  double run_s() const { return run_s_ > 0 ? run_s_ : 1.0; }

  // Seconds until `tokens_ahead` tokens and `jobs_ahead` jobs without tokens
  // are done, `slots` (>= 1) of them running at once; `live` as for
  // tokens_per_s.
  double WaitS(int64_t tokens_ahead, int64_t jobs_ahead, int slots, double live = 0) const;

 private:
  double tokens_per_s_ = 0;  // moving average; 0 until measured
  double run_s_ = 0;         // moving average; 0 until measured
};

// A wait as a retry hint: whole seconds, rounded up, within
// [kMinRetryAfterS, kMaxRetryAfterS].
double RetryAfterS(double wait_s);

}  // namespace medq::daemon
