// medq: the command-line client of medqd. See man/medq.1.
#include <cstdlib>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "common/error.h"
#include "common/version.h"

int main(int argc, char** argv) {
  using medq::cli::Action;
  CLI::App app{"medq: talk to the medq inference daemon (medqd) over its Unix socket.", "medq"};
  app.set_version_flag("--version", std::string("medq ") + medq::kVersion);
  app.require_subcommand(1);

  medq::cli::GlobalOptions global;
  if (const char* env = std::getenv("MEDQ_SOCKET"); env != nullptr) global.socket = env;
  app.add_option("--socket", global.socket, "The daemon's socket [env MEDQ_SOCKET]");
  app.add_option("--timeout", global.timeout_s, "Seconds to wait for a reply")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  app.add_flag("--json", global.json, "Print the daemon's reply as JSON");

  Action action;
  for (const medq::cli::CommandSpec& cmd : medq::cli::Commands()) {
    CLI::App* sub = app.add_subcommand(std::string(cmd.name), std::string(cmd.summary));
    sub->fallthrough();  // global flags may follow the command
    Action a = cmd.setup(*sub, global);
    sub->callback([&action, a] { action = a; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int status = app.exit(e);
    return status == 0 ? 0 : medq::kExitUsage;
  }
  return action ? action() : medq::kExitUsage;
}
