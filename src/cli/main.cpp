// chexscale's entry point: parses argv, applies the config layers, runs one subcommand, and turns
// every error into one clear line and an exit status (2 for usage errors, 1 for failures; `train`
// stopped by a signal returns 75, see cli/stop_signals.h).
#include <fmt/format.h>

#include <c10/util/Exception.h>
#include <malloc.h>
#include <CLI/CLI.hpp>

#include <exception>
#include <string>

#include "cli/command.h"
#include "common/error.h"
#include "common/log.h"
#include "common/openblas_kernels.h"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

const CLI::App* selected_leaf(const CLI::App& app) {
  const CLI::App* leaf = &app;
  while (true) {
    auto subs = leaf->get_subcommands();
    if (subs.empty()) return leaf;
    leaf = subs.front();
  }
}

// Fixes glibc malloc's thresholds. By default they adapt: the mmap threshold grows to the largest
// block freed so far, and the heap is trimmed whenever its free top exceeds twice that. Whether a
// training step's freed activations then go back to the kernel, to be faulted in again in the
// next step, depends on where small blocks happen to lie on the heap, which shifts with the size
// of the environment: one ResNet-18 64 px step took ~2,600 or ~7,000 page faults (and ~10 ms more
// system time) depending on the length of one environment variable. With glibc's largest mmap
// threshold (its 64-bit maximum, 32 MiB) and a trim threshold above a step's working set, every
// step reuses the heap. scripts/bench.sh gives the PyTorch peer these same two values.
void fix_malloc_thresholds() {
#ifdef __GLIBC__
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  ::mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  ::mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

int run(int argc, char** argv, const chexscale::OpenBlasChoice& blas) {
  using namespace chexscale;
  CLI::App app{
      "chexscale: distributed CheXNet training (DenseNet-121, ResNet-50) on ChestX-ray14,\n"
      "on bare metal or Kubernetes, measured side by side.\n"
      "Every option is also an env var CHEXSCALE_<NAME> and a key in a --config YAML file\n"
      "(precedence: flag > env > file > default).",
      "chexscale"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "Log level: debug, info, warn, error")
      ->capture_default_str();

  cli::CommandRegistry registry;
  cli::register_all_commands(app, registry);

  std::string cmd_name = "chexscale";
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* leaf = selected_leaf(app);
    const std::string path = leaf == &app ? "" : " " + cli::command_path(*leaf);
    // CLI11 calls a mistyped command name "A subcommand is required": name it instead.
    const bool has_commands = !leaf->get_subcommands([](const CLI::App*) { return true; }).empty();
    const std::string what = has_commands && !leaf->remaining().empty()
                                 ? "unknown command '" + leaf->remaining().front() + "'"
                                 : std::string(e.what());
    fmt::print(stderr, "chexscale{}: error: {}\nRun 'chexscale{} --help' for the options.\n", path,
               what, path);
    return kExitUsage;
  }

  auto* leaf = const_cast<CLI::App*>(selected_leaf(app));
  cmd_name = "chexscale " + cli::command_path(*leaf);
  const cli::RunFunction* fn = registry.find(leaf);
  if (fn == nullptr) {
    fmt::print(stderr, "{}: error: choose a subcommand\n{}", cmd_name, leaf->help());
    return kExitUsage;
  }
  cli::ConfigLayers layers;
  layers.apply(app, *leaf);
  log::configure(log_level);
  if (blas.replaced) {
    log::debug(
        "OpenBLAS loaded its {} kernels, its fallback for a CPU it does not know; using its "
        "{} kernels (OPENBLAS_CORETYPE chooses)",
        blas.loaded, blas.now);
  }
  return (*fn)(cli::RunContext{*leaf, layers});
}

}  // namespace

int main(int argc, char** argv) {
  fix_malloc_thresholds();
  const chexscale::OpenBlasChoice blas = chexscale::choose_openblas_kernels();
  try {
    return run(argc, argv, blas);
  } catch (const chexscale::UsageError& e) {
    fmt::print(stderr, "chexscale: error: {}\n", e.what());
    return kExitUsage;
  } catch (const chexscale::Error& e) {
    fmt::print(stderr, "chexscale: error: {}\n", e.what());
    return kExitFailure;
  } catch (const c10::Error& e) {
    fmt::print(stderr, "chexscale: error (LibTorch): {}\n", first_line(e.what_without_backtrace()));
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "chexscale: error: {}\n", e.what());
    return kExitFailure;
  }
}
