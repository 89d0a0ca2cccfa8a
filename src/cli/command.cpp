// CommandRegistry: the map from a selected CLI11 subcommand to the function that runs it.
#include "cli/command.h"

#include "cli/flag_names.h"
#include "common/error.h"

namespace chexscale::cli {

void CommandRegistry::add(CLI::App* cmd, RunFunction run) {
  ConfigLayers::add_config_option(*cmd);
  // A usage error from below the CLI names an options field; the user knows its flag.
  commands_.emplace_back(cmd, [cmd, run = std::move(run)](const RunContext& ctx) {
    try {
      return run(ctx);
    } catch (const UsageError& e) {
      throw UsageError(with_flag_name(e.what(), cmd));
    }
  });
}

const RunFunction* CommandRegistry::find(const CLI::App* cmd) const {
  for (const auto& [app, run] : commands_) {
    if (app == cmd) return &run;
  }
  return nullptr;
}

}  // namespace chexscale::cli
