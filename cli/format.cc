#include "cli/format.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/version.h"

namespace medq::cli {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

void AppendMemory(std::ostringstream& out, const MemorySnapshot& m, const char* indent) {
  out << indent << "host RSS      " << FormatBytes(m.rss_bytes) << "\n";
  for (const DeviceMemoryInfo& d : m.devices) {
    out << indent << "cuda:" << d.index << " " << d.name << "\n"
        << indent << "  total " << FormatBytes(d.total_bytes);
    if (d.measured) {
      out << ", free " << FormatBytes(d.free_bytes) << ", allocated "
          << FormatBytes(d.allocated_bytes) << ", reserved " << FormatBytes(d.reserved_bytes);
    } else {
      out << " (usage measured once a model is on the GPU; idle until then)";
    }
    out << "\n";
  }
}

void AppendJobs(std::ostringstream& out, const std::vector<JobInfo>& jobs) {
  for (const JobInfo& j : jobs) {
    char line[160];
    std::snprintf(line, sizeof(line), "  %-8s %-16s %-7s %-8s %8s %10s\n", j.job.c_str(),
                  j.op.c_str(), j.priority.c_str(), j.state.c_str(),
                  j.position > 0 ? std::to_string(j.position).c_str() : "-",
                  FormatDuration(j.waited_s).c_str());
    out << line;
  }
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  return unit == 0 ? std::to_string(bytes) + " B" : Fixed(v, 1) + " " + kUnits[unit];
}

std::string QuantizationSuffix(const std::string& quantization) {
  return quantization.empty() || quantization == "none" ? "" : " + " + quantization;
}

std::string FormatDuration(double s) {
  if (s < 60) return Fixed(s, 1) + " s";
  const auto total = static_cast<int64_t>(s);
  if (total < 3600) return std::to_string(total / 60) + " min " + std::to_string(total % 60) + " s";
  return std::to_string(total / 3600) + " h " + std::to_string(total % 3600 / 60) + " min";
}

std::string FormatHealth(const HealthInfo& h) {
  std::ostringstream out;
  out << "medqd " << h.version << " (pid " << h.pid << "): " << h.status
      << (h.ready ? ", ready" : ", not ready") << "\n";
  out << "  uptime        " << FormatDuration(h.uptime_s) << "\n";
  out << "  jobs          " << h.active_jobs << " running, " << h.queue_length << " waiting (max "
      << h.limits.max_queue << ")\n";
  out << "  connections   " << h.connections << " (max " << h.limits.max_connections << ")\n";
  if (h.loaded_models.empty()) out << "  models        none loaded\n";
  for (const LoadedModelInfo& m : h.loaded_models) {
    out << "  model         " << m.name << " (" << m.architecture << ", " << m.dtype
        << QuantizationSuffix(m.quantization) << " on " << m.device << ", "
        << FormatBytes(m.parameter_bytes);
    if (m.kind == "embedding") out << ", embedding, " << m.dims << " dims";
    if (!m.ready) out << ", not ready";
    out << ")\n";
  }
  if (!h.cuda_available) out << "  devices       no CUDA device; generation runs on the CPU\n";
  if (h.limits.max_gpu_memory_mb > 0) {
    out << "  gpu budget    " << h.limits.max_gpu_memory_mb << " MiB (max_gpu_memory_mb)\n";
  }
  AppendMemory(out, h.memory, "  ");
  for (const std::string& w : h.warnings)
    out << "  warning: " << w << "\n";
  return out.str();
}

std::string FormatQueue(const QueueInfo& q) {
  // A generation that holds its slot while the worker holds it back is
  // listed with the running ones, but counted as starting, never as running.
  const auto starting = std::count_if(q.running.begin(), q.running.end(),
                                      [](const JobInfo& j) { return j.state == "starting"; });
  std::ostringstream out;
  out << "running " << static_cast<int64_t>(q.running.size()) - starting;
  if (starting > 0) out << ", starting " << starting;
  out << ", waiting " << q.waiting.size() << " of " << q.max_queue << "\n";
  if (!q.running.empty() || !q.waiting.empty()) {
    char header[160];
    std::snprintf(header, sizeof(header), "  %-8s %-16s %-7s %-8s %8s %10s\n", "JOB", "OP", "PRIO",
                  "STATE", "POSITION", "WAITED");
    out << header;
    AppendJobs(out, q.running);
    AppendJobs(out, q.waiting);
  }
  out << "totals: processed " << q.totals.processed << ", rejected " << q.totals.rejected
      << ", timed out " << q.totals.timed_out << ", cancelled " << q.totals.cancelled << "\n";
  return out.str();
}

std::string FormatCleanup(const CleanupInfo& c) {
  std::ostringstream out;
  out << "memory cleaned up in " << Fixed(c.duration_ms, 1) << " ms\n";
  out << "  before:\n";
  AppendMemory(out, c.before, "    ");
  out << "  after:\n";
  AppendMemory(out, c.after, "    ");
  return out.str();
}

std::string FormatVersion(const VersionInfo& d) {
  std::ostringstream out;
  out << "medq " << kVersion << "\n";
  out << "medqd " << d.version << " (protocol v" << d.protocol << ", LibTorch " << d.torch_version
      << (d.cuda ? " with CUDA" : ", CPU only") << ")\n";
  return out.str();
}

}  // namespace medq::cli
