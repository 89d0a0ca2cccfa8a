// `chexscale launch`: torchrun's job on bare metal. Starts --nproc-per-node workers of a chexscale
// subcommand on this node with the environment contract, prefixes their output with the rank,
// forwards SIGINT/SIGTERM, tears the group down when one fails (exiting with its status) and
// restarts the group up to --max-restarts times.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "common/log.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "launch/local_launcher.h"

namespace chexscale::cli {

namespace {

// Flags whose values need converting (seconds -> durations).
struct LaunchFlags {
  launch::LaunchOptions options;
  int rdzv_timeout_s = static_cast<int>(distributed::kDefaultRdzvTimeout.count());
  double grace_period_s = launch::kDefaultGracePeriod.count();
};

}  // namespace

void add_launch_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a chexscale subcommand as a data-parallel job on this node:\n"
      "  chexscale launch --nproc-per-node 2 -- train --data DIR ...\n"
      "Each worker gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and\n"
      "MASTER_PORT; for several nodes run one launcher per node with the same --nnodes,\n"
      "--master-addr and --master-port and its own --node-rank (see docs/bare-metal.md).");
  auto f = std::make_shared<LaunchFlags>();
  auto& o = f->options;
  cmd->add_option("--nproc-per-node", o.nproc_per_node, "Workers on this node")
      ->capture_default_str();
  cmd->add_option("--nnodes", o.nnodes,
                  "Nodes in the job; -1 = NNODES or SLURM_NNODES from the environment, else 1")
      ->capture_default_str();
  cmd->add_option("--node-rank", o.node_rank,
                  "This node's index; -1 = JOB_COMPLETION_INDEX, SLURM_NODEID or NODE_RANK, "
                  "else 0")
      ->capture_default_str();
  cmd->add_option("--master-addr", o.master_addr,
                  "Host of node 0 (rendezvous store); empty = MASTER_ADDR, Slurm's first node, "
                  "or 127.0.0.1 on one node");
  cmd->add_option("--master-port", o.master_port,
                  fmt::format("Rendezvous port; 0 = a free port (one node) or MASTER_PORT / {}",
                              distributed::kDefaultMasterPort))
      ->capture_default_str();
  cmd->add_option("--max-restarts", o.max_restarts,
                  "Restart the whole local group this many times after a failure (workers "
                  "resume from their latest checkpoint)")
      ->capture_default_str();
  cmd->add_option("--rdzv-timeout", f->rdzv_timeout_s,
                  "Seconds workers wait for every rank to join (passed as "
                  "CHEXSCALE_RDZV_TIMEOUT)")
      ->capture_default_str();
  cmd->add_option("--grace-period", f->grace_period_s,
                  "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->capture_default_str();
  cmd->add_option("--program", o.program,
                  "Run this executable instead of chexscale (like torchrun --no-python); empty = "
                  "chexscale itself");
  cmd->add_option("command", o.args, "The chexscale subcommand and its options, after --")
      ->expected(-1);
  registry.add(cmd, [f](const RunContext& ctx) {
    launch::LaunchOptions options = f->options;
    options.grace_period = std::chrono::duration<double>(f->grace_period_s);
    if (ctx.config.source("rdzv-timeout") != ConfigSource::kDefault) {
      options.worker_rdzv_timeout = std::chrono::seconds(f->rdzv_timeout_s);
    }
    options = launch::resolve_topology(options, distributed::process_environment());
    const launch::LaunchResult result = launch::run_local_group(options);
    if (result.exit_code == 0) {
      log::info("chexscale launch: {}", result.summary);
    } else {
      fmt::print(stderr, "chexscale launch: {}\n", result.summary);
    }
    return result.exit_code;
  });
}

}  // namespace chexscale::cli
