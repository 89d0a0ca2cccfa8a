// `chexscale version`: the tool's and LibTorch's versions, the compiled-in backends and the
// OpenBLAS kernels in use.
#include <fmt/format.h>

#include "cli/command.h"
#include "common/openblas_kernels.h"
#include "common/torch_compat.h"
#include "common/version.h"

namespace chexscale::cli {

void add_version_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "version", "Print chexscale, LibTorch and backend versions, and the OpenBLAS kernels in use");
  registry.add(cmd, [](const RunContext&) {
    fmt::print("chexscale {}\nLibTorch {}\nCUDA available: {}\n", kVersion, compat::torch_version(),
               torch::cuda::is_available() ? "yes" : "no");
    const std::string blas = openblas_kernels();
    fmt::print("OpenBLAS kernels: {}\n",
               blas.empty() ? "none (no OpenBLAS built for many CPUs)" : blas);
    return 0;
  });
}

}  // namespace chexscale::cli
