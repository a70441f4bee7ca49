#include "cli/jobs.h"

#include <cstdio>
#include <sstream>

namespace medq::cli {
namespace {

using nlohmann::json;

std::string FormatStatus(const json& r) {
  std::ostringstream out;
  out << r.value("job", "") << ": " << r.value("state", "") << " (" << r.value("op", "") << ", "
      << r.value("priority", "") << " priority";
  if (r.contains("position")) out << ", position " << r.value("position", 0) << " in its queue";
  out << ")\n";
  return out.str();
}

// What a finished job prints: a generation's text, an embedding's vectors
// one JSON array a line; a failed or cancelled job's error goes to stderr
// through ReportError (see Status).
std::string FormatResult(const json& r) {
  const std::string state = r.value("state", "");
  if (state != "done") {
    if (r.contains("error")) return "";
    return r.value("job", "") + ": " + state + " (not finished; --wait waits for it)\n";
  }
  const json result = r.value("result", json::object());
  if (result.contains("text")) {
    std::string text = result.value("text", "");
    if (text.empty() || text.back() != '\n') text += "\n";
    return text;
  }
  std::string lines;
  for (const json& v : result.value("embeddings", json::array()))
    lines += v.dump() + "\n";
  return lines;
}

// 0 for a finished job, the error's status for a failed or cancelled one,
// 75 (try again later) for one that has not finished.
int ResultStatus(const json& r) {
  const std::string state = r.value("state", "");
  if (state == "done") return kExitOk;
  if (r.contains("error")) {
    const json& e = r["error"];
    Error error(ErrorCodeFromName(e.value("code", "")).value_or(ErrorCode::kInternal),
                r.value("job", "") + " " + state + ": " + e.value("message", ""));
    return ReportError(error);
  }
  return kExitTempFail;
}

}  // namespace

Action SetUpStatus(CLI::App& sub, const GlobalOptions& g) {
  auto job = std::make_shared<std::string>();
  sub.add_option("job", *job, "Job id, as `medq submit` printed it")->required();
  return [&g, job] { return RunOneShot(g, "status", {{"job", *job}}, FormatStatus); };
}

Action SetUpResult(CLI::App& sub, const GlobalOptions& g) {
  auto job = std::make_shared<std::string>();
  auto wait = std::make_shared<bool>(false);
  sub.add_option("job", *job, "Job id, as `medq submit` printed it")->required();
  sub.add_flag("-w,--wait", *wait, "Wait until the job has finished (no reply timeout)");
  return [&g, job, wait] {
    GlobalOptions options = g;
    if (*wait) options.timeout_s = 365.0 * 24 * 3600;  // as long as the job takes
    return RunOneShot(options, "result", {{"job", *job}, {"wait", *wait}}, FormatResult,
                      ResultStatus);
  };
}

Action SetUpForget(CLI::App& sub, const GlobalOptions& g) {
  auto job = std::make_shared<std::string>();
  sub.add_option("job", *job, "Job id; a job still waiting or running is cancelled")->required();
  return [&g, job] {
    return RunOneShot(g, "forget", {{"job", *job}},
                      [](const json& r) { return r.value("job", "") + ": forgotten\n"; });
  };
}

}  // namespace medq::cli
