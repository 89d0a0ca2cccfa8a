// How subcommands plug into the CLI: each file registers a CLI11 subcommand and a run function.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

#include "cli/config.h"

namespace chexscale::cli {

// Handed to a subcommand's run function once flags, env and config file are resolved.
struct RunContext {
  CLI::App& cmd;
  const ConfigLayers& config;
};

using RunFunction = std::function<int(const RunContext&)>;

class CommandRegistry {
 public:
  // Registers a leaf subcommand; adds --config to it.
  void add(CLI::App* cmd, RunFunction run);
  // The run function of the selected leaf subcommand, or nullptr.
  const RunFunction* find(const CLI::App* cmd) const;

 private:
  std::vector<std::pair<const CLI::App*, RunFunction>> commands_;
};

// Defined in commands.cpp: adds every subcommand of chexscale.
void register_all_commands(CLI::App& app, CommandRegistry& registry);

}  // namespace chexscale::cli
