// `chexscale env`: what this process would be in a distributed job (rank, world size, local rank,
// rendezvous address, backend) and where each value came from. Joins nothing.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/distributed_flags.h"
#include "cli/flag_names.h"
#include "distributed/device.h"
#include "distributed/env.h"
#include "distributed/process_group.h"

namespace chexscale::cli {

void add_env_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "env",
      "Print the distributed-job settings this process detects, and their sources: torchrun's\n"
      "names (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), else\n"
      "OpenMPI, MPICH/PMI, Slurm or a Kubernetes Indexed Job; flags override. Joins no job.");
  auto flags = std::make_shared<DistributedFlags>();
  add_distributed_flags(*cmd, *flags);
  registry.add(cmd, [flags](const RunContext& ctx) {
    const auto process_env = distributed::process_environment();
    const distributed::DistOptions options = flags->resolved();
    const distributed::RendezvousEnv e = distributed::detect_environment(process_env, options);
    // Resolved before anything is printed, so a bad --device/--backend prints only its error.
    const torch::Device device =
        distributed::resolve_device(options.device, e.local_rank.value, e.local_world_size.value);
    const distributed::Backend backend = distributed::resolve_backend(options.backend, device);
    if (backend == distributed::Backend::kMpi) distributed::require_mpi_launcher(e);
    auto row = [&](const char* name, const auto& field) {
      fmt::print("{:<17} {:<16} {}\n", name, field.value, with_flag_name(field.source, &ctx.cmd));
    };
    fmt::print("{:<17} {}\n", "convention", e.convention);
    row("rank", e.rank);
    row("world size", e.world_size);
    row("local rank", e.local_rank);
    row("local world size", e.local_world_size);
    row("node rank", e.node_rank);
    row("master address", e.master_addr);
    row("master port", e.master_port);
    fmt::print("{:<17} {:<16} {}\n", "store served by",
               e.agent_store.value ? "launcher's agent" : "rank 0", e.agent_store.source);
    fmt::print("{:<17} {:<16} {}\n", "store prefix",
               e.store_prefix.value.empty() ? "none" : e.store_prefix.value, e.store_prefix.source);
    fmt::print("{:<17} {:<16} requested {}\n", "device", device.str(),
               distributed::to_string(options.device));
    fmt::print("{:<17} {:<16} requested {}\n", "backend", distributed::to_string(backend),
               distributed::to_string(options.backend));
    if (backend == distributed::Backend::kGloo && e.world_size.value > 1) {
      const distributed::GlooAddress gloo = distributed::choose_gloo_address(e, process_env);
      fmt::print("{:<17} {:<16} {}\n", "gloo binds",
                 gloo.interface.empty() ? gloo.address : "interface " + gloo.interface,
                 gloo.reason);
    }
    return 0;
  });
}

}  // namespace chexscale::cli
