// The options a command was given, turned back into command-line arguments that give them again:
// how `chexscale bench --workers` runs each job of its sweep with the flags it was given.
#pragma once

#include <CLI/CLI.hpp>

#include <set>
#include <string>
#include <vector>

namespace chexscale::cli {

// Every option of `cmd` that has a value (from a flag, the environment or a config file), in
// the order the command declares them: "--NAME VALUE" for each value, "--NAME" for a flag that is
// on (nothing for one that is off). Options whose long names are in `except`, --config and
// positionals are left out.
std::vector<std::string> given_options_as_args(const CLI::App& cmd,
                                               const std::set<std::string>& except);

}  // namespace chexscale::cli
