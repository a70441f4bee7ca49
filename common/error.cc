#include "common/error.h"

#include <array>
#include <cctype>

namespace medq {
namespace {

struct CodeInfo {
  ErrorCode code;
  std::string_view name;
  int exit_status;
};

// The closed set; docs/protocol.md mirrors this table.
constexpr std::array kCodes = {
    CodeInfo{ErrorCode::kInvalidRequest, "INVALID_REQUEST", kExitDataErr},
    CodeInfo{ErrorCode::kUnknownOp, "UNKNOWN_OP", kExitUsage},
    CodeInfo{ErrorCode::kUnsupportedVersion, "UNSUPPORTED_VERSION", kExitUsage},
    CodeInfo{ErrorCode::kTooLarge, "TOO_LARGE", kExitDataErr},
    CodeInfo{ErrorCode::kPermissionDenied, "PERMISSION_DENIED", kExitNoPerm},
    CodeInfo{ErrorCode::kNotReady, "NOT_READY", kExitTempFail},
    CodeInfo{ErrorCode::kQueueFull, "QUEUE_FULL", kExitTempFail},
    CodeInfo{ErrorCode::kQueueTimeout, "QUEUE_TIMEOUT", kExitTempFail},
    CodeInfo{ErrorCode::kTimeout, "TIMEOUT", kExitTempFail},
    CodeInfo{ErrorCode::kModelNotFound, "MODEL_NOT_FOUND", kExitDataErr},
    CodeInfo{ErrorCode::kGpuOom, "GPU_OOM", kExitTempFail},
    CodeInfo{ErrorCode::kInsufficientMemory, "INSUFFICIENT_MEMORY", kExitTempFail},
    CodeInfo{ErrorCode::kCancelled, "CANCELLED", kExitTempFail},
    CodeInfo{ErrorCode::kInternal, "INTERNAL", kExitSoftware},
};

const CodeInfo& Info(ErrorCode code) {
  for (const CodeInfo& info : kCodes) {
    if (info.code == code) return info;
  }
  return kCodes.back();  // unreachable for a valid enum value
}

}  // namespace

std::string_view ErrorCodeName(ErrorCode code) {
  return Info(code).name;
}

std::optional<ErrorCode> ErrorCodeFromName(std::string_view name) {
  for (const CodeInfo& info : kCodes) {
    if (info.name == name) return info.code;
  }
  return std::nullopt;
}

int ExitStatusFor(ErrorCode code) {
  return Info(code).exit_status;
}

std::string Echo(std::string_view value) {
  if (value.size() <= kMaxEchoBytes) return std::string(value);
  size_t cut = kMaxEchoBytes;
  // Back up over continuation bytes (10xxxxxx) to the start of a character.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80)
    --cut;
  return std::string(value.substr(0, cut)) + "\u2026 (" + std::to_string(value.size()) + " bytes)";
}

std::optional<std::string> ParamOf(std::string_view where) {
  constexpr std::string_view kPrefix = "params.";
  if (where.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  size_t end = kPrefix.size();
  while (end < where.size() &&
         (std::isalnum(static_cast<unsigned char>(where[end])) != 0 || where[end] == '_')) {
    ++end;
  }
  if (end == kPrefix.size()) return std::nullopt;
  if (end < where.size() && where[end] != '.' && where[end] != '[' && where[end] != ' ' &&
      where[end] != ':') {
    return std::nullopt;
  }
  return std::string(where.substr(kPrefix.size(), end - kPrefix.size()));
}

}  // namespace medq
