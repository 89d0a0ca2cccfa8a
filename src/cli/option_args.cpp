// Given options as arguments; see option_args.h.
#include "cli/option_args.h"

#include "cli/config.h"

namespace chexscale::cli {

std::vector<std::string> given_options_as_args(const CLI::App& cmd,
                                               const std::set<std::string>& except) {
  std::vector<std::string> args;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = long_name(*opt);
    if (name.empty() || name == "config" || except.count(name) != 0 || opt->count() == 0) continue;
    if (opt->get_expected_min() == 0) {  // a flag
      if (opt->as<bool>()) args.push_back("--" + name);
      continue;
    }
    for (const std::string& value : opt->results())
      args.insert(args.end(), {"--" + name, value});
  }
  return args;
}

}  // namespace chexscale::cli
