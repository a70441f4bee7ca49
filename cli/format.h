// Human-readable output of the daemon's replies. Pure functions of the typed
// results, so that tests can check them without a daemon.
#pragma once

#include <cstdint>
#include <string>

#include "common/messages.h"

namespace medq::cli {

std::string FormatBytes(int64_t bytes);      // "1.5 GiB"
std::string FormatDuration(double seconds);  // "3 h 12 min", "4.2 s"
// " + int8" after a model's dtype for a quantized model; "" for "none" or "".
std::string QuantizationSuffix(const std::string& quantization);
std::string FormatHealth(const HealthInfo& health);
std::string FormatQueue(const QueueInfo& queue);
std::string FormatCleanup(const CleanupInfo& cleanup);
std::string FormatVersion(const VersionInfo& daemon);

}  // namespace medq::cli
