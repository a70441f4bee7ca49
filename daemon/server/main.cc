// medqd: the medq inference daemon. See docs/architecture.md.
#include <csignal>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/version.h"
#include "daemon/config.h"
#include "daemon/engine/blas_threads.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/host_pool.h"
#include "daemon/engine/tuning.h"
#include "daemon/logging.h"
#include "daemon/loop/open_files.h"
#include "daemon/server/server.h"

int main(int argc, char** argv) {
  medq::engine::QuietBlasThreads();  // first: it sets an environment variable
  medq::engine::UsePooledHostMemory();
  std::signal(SIGPIPE, SIG_IGN);  // a client that vanished is an error value, not a signal
  medq::daemon::ConfigOutcome outcome = medq::daemon::LoadConfig(argc, argv);
  if (auto* exit_now = std::get_if<medq::daemon::ExitNow>(&outcome)) return exit_now->status;
  auto& config = std::get<medq::daemon::Config>(outcome);
  // The engine's diagnostic switches are not configuration keys, but a
  // value the engine would not take is refused as a key's would be.
  if (const std::string bad = medq::engine::tuning::TuningEnvironmentError(); !bad.empty()) {
    std::cerr << "medqd: " << bad << "\n";
    return 64;
  }

  medq::daemon::SetUpLogging(config.log_level);
  spdlog::info("medqd {} starting{}", medq::kVersion,
               config.config_file.empty() ? "" : " with " + config.config_file);
  if (config.test_fault_injection) {
    spdlog::warn(
        "--test-fault-injection is on: clients may make loads and decode steps fail. "
        "Never use it in production.");
  }
  if (config.test_device_loop_on_cpu) {
    spdlog::warn(
        "--test-device-loop-on-cpu is on: models on the CPU run the GPU's loop, which is "
        "slower there. Never use it in production.");
    medq::engine::SetDeviceLoopOnCpu(true);
  }
  if (config.log_prompts) {
    spdlog::warn(
        "log_prompts is on: every generation's prompt and output will be written to the log. "
        "They are patient data; use it for debugging only.");
  }
  const uint64_t open_files = medq::daemon::RaiseOpenFileLimit();
  if (const int allowed = medq::daemon::ConnectionsAllowed(config.max_connections, open_files);
      allowed < config.max_connections) {
    spdlog::warn(
        "max_connections {} exceeds what the open-file limit ({}) allows beside the {} "
        "descriptors kept for model files and the daemon; serving at most {} connections "
        "(raise LimitNOFILE= or `ulimit -n` to allow more)",
        config.max_connections, open_files, medq::daemon::ReservedDescriptors(open_files), allowed);
    config.max_connections = allowed;
  }
  medq::daemon::Server server(config, std::vector<std::string>(argv + 1, argv + argc));
  return server.Run();
}
