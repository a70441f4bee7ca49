#include "cli/session.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "ipc/socket_path.h"

namespace medq::cli {

std::chrono::milliseconds TimeoutOf(const GlobalOptions& options) {
  return std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
}

Result<ipc::Client> ConnectToDaemon(const GlobalOptions& options) {
  std::string path = options.socket;
  if (path.empty()) {
    const std::vector<std::string> candidates = ipc::DefaultClientSocketPaths();
    path = candidates.front();
    for (const std::string& c : candidates) {
      struct stat st {};
      if (stat(c.c_str(), &st) == 0) {
        path = c;
        break;
      }
    }
  }
  return ipc::Client::Connect(path);
}

int ReportError(const Error& error) {
  std::cerr << "medq: " << error.message;
  if (error.retry_after_s) {
    std::cerr << " (retry in " << static_cast<int64_t>(std::ceil(*error.retry_after_s)) << " s)";
  }
  std::cerr << " [" << ErrorCodeName(error.code) << "]\n";
  return ExitStatusFor(error.code);
}

int ReportUnreachable(const Error& error) {
  std::cerr << "medq: " << error.message << "\n";
  return error.code == ErrorCode::kPermissionDenied ? kExitNoPerm : kExitUnavailable;
}

int RunOneShot(const GlobalOptions& options, std::string_view op, const Params& params,
               const std::function<std::string(const nlohmann::json&)>& format,
               const std::function<int(const nlohmann::json&)>& status) {
  auto client = ConnectToDaemon(options);
  if (!client.ok()) return ReportUnreachable(client.error());
  auto reply = client->Call(op, params, TimeoutOf(options));
  if (!reply.ok()) {
    return reply.error().code == ErrorCode::kQueueTimeout ? ReportError(reply.error())
                                                          : ReportUnreachable(reply.error());
  }
  if (auto error = ipc::ErrorOf(*reply)) return ReportError(*error);
  const nlohmann::json result = reply->value("result", nlohmann::json::object());
  std::cout << (options.json ? result.dump() + "\n" : format(result)) << std::flush;
  return status ? status(result) : kExitOk;
}

}  // namespace medq::cli
