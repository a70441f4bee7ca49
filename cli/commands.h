// The `medq` commands, in one table. Each command adds its own flags to its
// CLI11 subcommand and returns the action to run once parsing succeeded.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/session.h"

namespace medq::cli {

using Action = std::function<int()>;

struct CommandSpec {
  std::string_view name;
  std::string_view summary;
  // Adds the command's flags to `sub`; the returned action reads them.
  Action (*setup)(CLI::App& sub, const GlobalOptions& global);
};

std::span<const CommandSpec> Commands();

}  // namespace medq::cli
