// The local launcher (torchrun's job on bare metal): starts this node's workers with the
// environment contract, relays their output prefixed with their rank, forwards SIGINT/SIGTERM,
// tears the whole group down when one worker fails, and restarts the group up to max_restarts
// times (workers resume from their latest checkpoint on their own).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace chexscale::launch {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = -1;          // -1: NNODES / SLURM_NNODES from the environment, else 1
  int node_rank = -1;       // -1: JOB_COMPLETION_INDEX / SLURM_NODEID / NODE_RANK, else 0
  std::string master_addr;  // "": MASTER_ADDR, else Slurm's first host, else 127.0.0.1
  int master_port = 0;      // 0: a free port per attempt (one node), else MASTER_PORT / 29500
  int max_restarts = 0;
  std::chrono::milliseconds grace_period{5000};  // SIGTERM -> SIGKILL when tearing down
  std::string program;                           // "": this executable (/proc/self/exe)
  std::vector<std::string> args;                 // the worker's arguments
  std::map<std::string, std::string> extra_env;  // added to every worker's environment
  int output_fd = 1;                             // where the workers' stdout lines go
  int error_fd = 2;                              // and their stderr lines
};

struct LaunchResult {
  int exit_code = 0;     // 0, the first failed worker's status, or 128 + a forwarded signal
  int failed_rank = -1;  // global rank of the first worker that failed
  int attempts = 0;      // how many times the group was started
  std::string summary;   // one line for humans: what happened
};

// Fills the -1 / "" / 0 fields of `options` from `env` (normally the process environment).
// Throws UsageError for inconsistent values.
LaunchOptions resolve_topology(LaunchOptions options,
                               const std::map<std::string, std::string>& env);

// Runs the local group to completion (options already resolved).
LaunchResult run_local_group(const LaunchOptions& options);

}  // namespace chexscale::launch
