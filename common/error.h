// The closed set of error codes of the medq protocol, and the Error value that
// carries one from where it happens to the client, unchanged.
//
// Every failure that can reach a client has exactly one ErrorCode. The set is
// closed: docs/protocol.md lists every code, what it means and the `medq` exit
// status it maps to. Adding a code is a protocol change.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace medq {

enum class ErrorCode {
  kInvalidRequest,      // the request is malformed or a field is wrong
  kUnknownOp,           // "op" names no operation
  kUnsupportedVersion,  // "v" is not a protocol version this daemon speaks
  kTooLarge,            // a line exceeded the maximum message size
  kPermissionDenied,    // the peer may not use the daemon, or a path is off limits
  kNotReady,            // the daemon is starting, draining or has no usable device
  kQueueFull,           // the generation queue is full; retry later
  kQueueTimeout,        // the job waited longer than its queue timeout
  kTimeout,             // the job did not finish within its deadline (timeout_s)
  kModelNotFound,       // no such model (or adapter) in the models directory
  kGpuOom,              // the GPU ran out of memory; retry later
  kInsufficientMemory,  // the job cannot fit the memory budget now; retry later
  kCancelled,           // the job was cancelled by the client or the daemon
  kInternal,            // a bug or an unexpected failure; see the daemon's log
};

// The wire name of a code, e.g. "QUEUE_FULL".
std::string_view ErrorCodeName(ErrorCode code);

// Parses a wire name; nullopt for a name outside the closed set.
std::optional<ErrorCode> ErrorCodeFromName(std::string_view name);

// The sysexits-style exit status `medq` uses for a code:
// 64 usage, 65 bad input, 69 unavailable, 75 retry later, 77 permission, 70 internal.
int ExitStatusFor(ErrorCode code);

// Exit statuses shared by the CLI (sysexits.h values).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 64;
inline constexpr int kExitDataErr = 65;
inline constexpr int kExitUnavailable = 69;
inline constexpr int kExitSoftware = 70;
inline constexpr int kExitTempFail = 75;
inline constexpr int kExitNoPerm = 77;

// A failure with its protocol code, a message for a person (what happened and
// what to do), for retryable codes an optional hint in seconds, and for an
// INVALID_REQUEST about one field of the request that field's name (`param`:
// the top-level key of params, "temperature" for "params.temperature must be
// ..."; HTTP's OpenAI error object carries it as "param").
struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::optional<double> retry_after_s;
  std::optional<std::string> param;

  Error() = default;
  Error(ErrorCode c, std::string m, std::optional<double> retry = std::nullopt)
      : code(c), message(std::move(m)), retry_after_s(retry) {}
};

// A value from the client (a model name, an op, a key, a job id) as an error
// message quotes it: at most kMaxEchoBytes of it, cut at a UTF-8 character
// boundary and marked with its full length ("abc… (15728640 bytes)"), so
// that a huge value is never sent back whole.
inline constexpr size_t kMaxEchoBytes = 200;
std::string Echo(std::string_view value);

// The top-level field a place in the request names: "params.KEY", or
// "params.KEY" followed by ".", "[" or " ", gives KEY; any other place
// nullopt.
std::optional<std::string> ParamOf(std::string_view where);

// The INVALID_REQUEST error every parser returns for input it refuses.
// INVALID_REQUEST "WHERE WHAT": a field (or a place inside one) and what is
// wrong with it; `param` is the field WHERE is in (ParamOf).
inline Error InvalidAt(const std::string& where, const std::string& what) {
  Error e(ErrorCode::kInvalidRequest, where + " " + what);
  e.param = ParamOf(where);
  return e;
}

// INVALID_REQUEST about the field `param`, with a message of its own.
inline Error InvalidField(std::string param, std::string message) {
  Error e(ErrorCode::kInvalidRequest, std::move(message));
  e.param = std::move(param);
  return e;
}

// INVALID_REQUEST with `message`; one that begins with the place it is
// about ("params.KEY ...", as InvalidAt writes it) names that field in
// `param`.
inline Error InvalidRequest(std::string message) {
  Error e(ErrorCode::kInvalidRequest, std::move(message));
  e.param = ParamOf(e.message.substr(0, e.message.find(' ')));
  return e;
}

}  // namespace medq
