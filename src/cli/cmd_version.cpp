// `chexscale version`: the tool's and LibTorch's versions and the compiled-in backends.
#include <fmt/format.h>

#include "cli/command.h"
#include "common/torch_compat.h"
#include "common/version.h"

namespace chexscale::cli {

void add_version_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand("version", "Print chexscale, LibTorch and backend versions");
  registry.add(cmd, [](const RunContext&) {
    fmt::print("chexscale {}\nLibTorch {}\nCUDA available: {}\n", kVersion, compat::torch_version(),
               torch::cuda::is_available() ? "yes" : "no");
    return 0;
  });
}

}  // namespace chexscale::cli
