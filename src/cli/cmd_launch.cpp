// `chexscale launch`: torchrun's job on bare metal. Starts --nproc-per-node workers of a chexscale
// subcommand on this node with the environment contract, prefixes their output with the rank,
// forwards SIGTERM/SIGINT/SIGUSR1 (exit 75 when every worker stopped at a checkpoint), tears the
// group down when one fails (exiting with its status) and
// restarts the group up to --max-restarts times. Flags left unset take torchrun's PET_* variables
// (a Kubeflow PyTorchJob sets them), so it runs where torchrun would.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/stop_signals.h"
#include "common/error.h"
#include "common/log.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "distributed/rendezvous_gate.h"
#include "launch/elastic_agent.h"
#include "launch/local_launcher.h"
#include "launch/rendezvous_server.h"

namespace chexscale::cli {

namespace {

// Flags whose values need converting (seconds -> durations).
struct LaunchFlags {
  launch::LaunchOptions options;
  std::string nnodes = "-1";
  std::string elastic = "restart";
  std::string token_file;
  double last_call_s = 2.0;
  double heartbeat_timeout_s = 10.0;
  int rdzv_timeout_s = static_cast<int>(distributed::kDefaultRdzvTimeout.count());
  double grace_period_s = launch::kDefaultGracePeriod.count();
};

// Fills the options no flag, CHEXSCALE_* variable or config file set from torchrun's PET_*
// variables.
void take_torchrun_flags(const RunContext& ctx, const std::map<std::string, std::string>& env,
                         launch::LaunchOptions& o) {
  const launch::TorchrunFlags pet = launch::read_torchrun_flags(env);
  auto take = [&](const char* option, auto& field, const auto& value) {
    if (value && ctx.config.source(option) == ConfigSource::kDefault) field = *value;
  };
  take("nnodes", o.nnodes, pet.nnodes);
  take("nnodes", o.max_nnodes, pet.max_nnodes);
  take("nproc-per-node", o.nproc_per_node, pet.nproc_per_node);
  take("node-rank", o.node_rank, pet.node_rank);
  take("max-restarts", o.max_restarts, pet.max_restarts);
  take("master-addr", o.master_addr, pet.master_addr);
  take("master-port", o.master_port, pet.master_port);
  take("rdzv-id", o.rdzv_id, pet.rdzv_id);
}

// How many workers and nodes, and the elastic rendezvous of the nodes.
void add_membership_options(CLI::App* cmd, LaunchFlags& f) {
  auto& o = f.options;
  cmd->add_option("--nproc-per-node", o.nproc_per_node,
                  "Workers on this node (unset: PET_NPROC_PER_NODE)")
      ->capture_default_str();
  cmd->add_option("--nnodes", f.nnodes,
                  "Nodes in the job, N or MIN:MAX (elastic: nodes meet at the rendezvous server "
                  "--master-addr:--master-port, see `chexscale rendezvous-server`); -1 = "
                  "PET_NNODES, NNODES or SLURM_NNODES from the environment, else 1")
      ->capture_default_str();
  cmd->add_option("--node-name", o.node_name,
                  "Elastic: this node's name in the job's messages (empty = the host name)");
  cmd->add_option("--rdzv-id", o.rdzv_id,
                  "Elastic: the job's name on the rendezvous server (unset: PET_RDZV_ID); every "
                  "node of a job gives the same, a new job on a server that ran one gives a new "
                  "one")
      ->capture_default_str();
  cmd->add_option("--rdzv-token-file", f.token_file,
                  fmt::format("Elastic: a file whose first line is the job token the rendezvous "
                              "server asks for (else {}); a launcher or worker without it is "
                              "refused",
                              distributed::kEnvRdzvToken));
  cmd->add_option("--elastic", f.elastic,
                  "Elastic: what a membership change does. restart = every node's workers stop "
                  "and restart from the last checkpoint; in-place = the live nodes' workers keep "
                  "running, build the next round's process group and take the newest training "
                  "state from memory (gloo; no checkpoint read, no step lost to a join)")
      ->check(CLI::IsMember({"restart", "in-place"}))
      ->capture_default_str();
  cmd->add_option("--rdzv-last-call", f.last_call_s,
                  "Elastic: seconds without a new node, once MIN have joined, before a round "
                  "closes")
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout", f.heartbeat_timeout_s,
                  "Elastic: seconds of silence after which another node is lost and the round "
                  "restarts without it")
      ->capture_default_str();
}

// Where this node is in a fixed job and where the rendezvous store is.
void add_rendezvous_options(CLI::App* cmd, LaunchFlags& f) {
  auto& o = f.options;
  cmd->add_option("--node-rank", o.node_rank,
                  "This node's index; -1 = PET_NODE_RANK, JOB_COMPLETION_INDEX, SLURM_NODEID or "
                  "NODE_RANK, else 0")
      ->capture_default_str();
  cmd->add_option("--master-addr", o.master_addr,
                  "Host of node 0 (rendezvous store); empty = the host of PET_RDZV_ENDPOINT or "
                  "PET_MASTER_ADDR, MASTER_ADDR, Slurm's first node, or 127.0.0.1 on one node");
  cmd->add_option("--master-port", o.master_port,
                  fmt::format("Rendezvous port; 0 = the port of PET_RDZV_ENDPOINT or "
                              "PET_MASTER_PORT, a free port (one node), or MASTER_PORT / {}",
                              distributed::kDefaultMasterPort))
      ->capture_default_str();
}

// Restarts, timeouts and stopping of the workers, and what they run.
void add_worker_options(CLI::App* cmd, LaunchFlags& f) {
  auto& o = f.options;
  cmd->add_option("--max-restarts", o.max_restarts,
                  "Restart the whole local group this many times after a failure (workers "
                  "resume from their latest checkpoint; unset: PET_MAX_RESTARTS)")
      ->capture_default_str();
  cmd->add_option("--rdzv-timeout", f.rdzv_timeout_s,
                  fmt::format("Seconds workers wait for every rank to join (passed as {}); "
                              "elastic: also the most a node waits for a round to take it in, "
                              "or retries a failing rendezvous server",
                              distributed::kEnvRdzvTimeout))
      ->capture_default_str();
  cmd->add_option("--grace-period", f.grace_period_s,
                  "Seconds between SIGTERM and SIGKILL when stopping the workers after one failed")
      ->capture_default_str();
  cmd->add_option(
         "--stop-grace", o.stop_grace,
         fmt::format("Seconds the workers have to checkpoint and exit on a SIGTERM, SIGINT "
                     "or SIGUSR1 to the launcher (forwarded; passed to them as {}, train's "
                     "--stop-grace); SIGKILL {} s later",
                     distributed::kEnvStopGrace, launch::kStopKillMargin.count()))
      ->capture_default_str();
  cmd->add_option("--program", o.program,
                  "Run this executable instead of chexscale (like torchrun --no-python); empty = "
                  "chexscale itself");
  cmd->add_option("--worker-cgroup", o.worker_cgroups,
                  "Cgroup directory each worker joins before it starts (its cgroup.procs; v1 or "
                  "v2), {local_rank} replaced by the worker's local rank; repeat or comma-separate "
                  "for several hierarchies (v1 cpu and cpuacct). The lab's fixed-speed workers: "
                  "a CPU quota per worker")
      ->delimiter(',')
      ->allow_extra_args(false)  // one value per flag: "--" stays the command's separator
      ->type_name("DIR");
  cmd->add_option("command", o.args, "The chexscale subcommand and its options, after --")
      ->expected(-1);
}

// Resolves the options (flags, PET_* variables, the environment) and runs the group.
int run_launch(const LaunchFlags& f, const RunContext& ctx) {
  launch::LaunchOptions options = f.options;
  if (f.nnodes != "-1") launch::parse_nnodes(f.nnodes, "--nnodes", options);
  options.last_call = std::chrono::duration<double>(f.last_call_s);
  options.heartbeat_timeout = std::chrono::duration<double>(f.heartbeat_timeout_s);
  options.grace_period = std::chrono::duration<double>(f.grace_period_s);
  if (ctx.config.source("rdzv-timeout") != ConfigSource::kDefault) {
    options.worker_rdzv_timeout = std::chrono::seconds(f.rdzv_timeout_s);
  }
  const auto env = distributed::process_environment();
  take_torchrun_flags(ctx, env, options);
  options = launch::resolve_topology(options, env);
  options.in_place = f.elastic == "in-place";
  if (options.elastic()) options.rdzv_token = launch::read_job_token(f.token_file);
  if (options.in_place && !options.elastic()) {
    throw UsageError("--elastic in-place needs an elastic job: --nnodes MIN:MAX with MIN < MAX");
  }
  const launch::LaunchResult result =
      options.elastic() ? launch::run_elastic_group(options) : launch::run_local_group(options);
  if (result.exit_code == 0) {
    log::info("chexscale launch: {}", result.summary);
  } else {
    fmt::print(stderr, "chexscale launch: {}\n", result.summary);
  }
  return result.exit_code;
}

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
  add_membership_options(cmd, *f);
  add_rendezvous_options(cmd, *f);
  add_worker_options(cmd, *f);
  registry.add(cmd, [f](const RunContext& ctx) { return run_launch(*f, ctx); });
}

}  // namespace chexscale::cli
