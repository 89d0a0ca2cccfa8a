// CommandRegistry: the map from a selected CLI11 subcommand to the function that runs it.
#include "cli/command.h"

namespace chexscale::cli {

void CommandRegistry::add(CLI::App* cmd, RunFunction run) {
  ConfigLayers::add_config_option(*cmd);
  commands_.emplace_back(cmd, std::move(run));
}

const RunFunction* CommandRegistry::find(const CLI::App* cmd) const {
  for (const auto& [app, run] : commands_) {
    if (app == cmd) return &run;
  }
  return nullptr;
}

}  // namespace chexscale::cli
