// The local launcher (torchrun's job on bare metal): starts this node's workers with the
// environment contract, relays their output prefixed with their rank, forwards SIGTERM, SIGINT
// and SIGUSR1 (the workers checkpoint and exit kExitPreempted; after stop_grace they are killed),
// tears the whole group down when one worker fails, and restarts the group up to max_restarts
// times (workers resume from their latest checkpoint on their own).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch/group_supervisor.h"
#include "train/stop_contract.h"

namespace chexscale::launch {

// Seconds between SIGTERM and SIGKILL when tearing the workers down after one failed.
inline constexpr std::chrono::duration<double> kDefaultGracePeriod{5.0};
inline constexpr std::chrono::duration<double> kMaxGracePeriod{3600.0};
// Each worker is a whole process (LibTorch loaded, two pipes): a count above this is a typo, not a
// job (the largest nodes have 8-16 GPUs or a few hundred cores), and would flood the node.
inline constexpr int kMaxProcPerNode = 1024;
// After a forwarded stop signal the launcher kills the workers this long after their own
// --stop-grace deadline, so that a worker ending on its own deadline removes its partial files.
inline constexpr std::chrono::seconds kStopKillMargin{1};
// torchrun's --rdzv-id when none is given.
inline constexpr const char* kDefaultRdzvId = "none";

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = -1;  // -1: NNODES / SLURM_NNODES from the environment, else 1
  // Elastic membership (`--nnodes MIN:MAX` with MIN < MAX): nnodes is MIN and this is MAX; 0 for
  // a fixed number of nodes. master_addr:master_port is then the rendezvous server, node ranks
  // come from each round, and node_rank is not used.
  int max_nnodes = 0;
  std::string node_name;  // elastic: this node's name in messages; "": the host name
  // Elastic: the job's name on the rendezvous server (torchrun's --rdzv-id): launchers of one job
  // give the same; a new job on a server that held a finished one needs a new one.
  std::string rdzv_id = kDefaultRdzvId;
  // Elastic: the job token the rendezvous server's gate asks for ("" = none); passed to the
  // workers as CHEXSCALE_RDZV_TOKEN.
  std::string rdzv_token;
  // Elastic (--elastic in-place): a round's end leaves the workers of live nodes running; they
  // regroup into the next round from memory (distributed/elastic_round.h). false: every node's
  // workers restart from the last checkpoint (--elastic restart).
  bool in_place = false;
  std::chrono::duration<double> last_call{2.0};  // elastic: quiet time before a round closes
  std::chrono::duration<double> heartbeat_timeout{
      10.0};                // elastic: a node silent this long is lost
  int node_rank = -1;       // -1: JOB_COMPLETION_INDEX / SLURM_NODEID / NODE_RANK, else 0
  std::string master_addr;  // "": MASTER_ADDR, else Slurm's first host, else 127.0.0.1
  int master_port =
      0;  // 0: a free port per attempt (one node), else MASTER_PORT / kDefaultMasterPort
  int max_restarts = 0;
  std::chrono::duration<double> grace_period = kDefaultGracePeriod;
  // Seconds a forwarded SIGTERM/SIGINT/SIGUSR1 gives the workers (passed to them as
  // CHEXSCALE_STOP_GRACE, train's --stop-grace); then they are killed.
  int stop_grace = train::kDefaultStopGrace;
  // The workers' rendezvous timeout, passed as CHEXSCALE_RDZV_TIMEOUT; nullopt: their own.
  std::optional<std::chrono::seconds> worker_rdzv_timeout;
  std::string program;                           // "": this executable (/proc/self/exe)
  std::vector<std::string> args;                 // the worker's arguments
  std::map<std::string, std::string> extra_env;  // added to every worker's environment
  // Cgroup directories each worker joins before it starts, "{local_rank}" replaced by its local
  // rank (launch/worker_cgroup.h); empty: the launcher's own groups.
  std::vector<std::string> worker_cgroups;
  int output_fd = 1;  // where the workers' stdout lines go
  int error_fd = 2;   // and their stderr lines

  // Throws UsageError naming the field: nproc_per_node outside [1, kMaxProcPerNode], master_port
  // outside [0, 65535], max_restarts < 0, grace_period outside [0, kMaxGracePeriod] (or NaN),
  // stop_grace outside [1, kMaxStopGrace], worker_rdzv_timeout under 1 s, max_nnodes under
  // nnodes (when set), last_call or heartbeat_timeout outside (0, kMaxGracePeriod], an empty
  // rdzv_id.
  void validate() const;
  bool elastic() const { return max_nnodes > 0 && max_nnodes != nnodes; }
};

struct LaunchResult {
  // 0; train::kExitPreempted when every worker stopped with it (a forwarded stop signal, or one
  // that reached the workers); 128 + a forwarded signal when some worker did not; else the first
  // failed worker's status.
  int exit_code = 0;
  int failed_rank = -1;  // global rank of the first worker that failed
  int attempts = 0;      // how many times the group was started
  std::string summary;   // one line for humans: what happened
};

// torchrun's own flags as the PET_<FLAG> variables torchrun reads them from (a Kubeflow PyTorchJob
// sets them for it), so `chexscale launch` runs where torchrun would: PET_NNODES ("N" or "N:N"),
// PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MAX_RESTARTS, PET_MASTER_ADDR and PET_MASTER_PORT, and
// PET_RDZV_ENDPOINT ("host[:port]", the store's host), which wins over PET_MASTER_* as it does
// in torchrun. PET_NNODES "MIN:MAX" is an elastic range (nnodes MIN, max_nnodes MAX);
// PET_RDZV_ID the job's name on the rendezvous server. Unset variables stay unset. Throws
// UsageError for a value that is not an integer.
struct TorchrunFlags {
  std::optional<std::string> rdzv_id;
  std::optional<int> nnodes;
  std::optional<int> max_nnodes;
  std::optional<int> nproc_per_node;
  std::optional<int> node_rank;
  std::optional<int> max_restarts;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

TorchrunFlags read_torchrun_flags(const std::map<std::string, std::string>& env);

// Fills the -1 / "" / 0 fields of `options` from `env` (normally the process environment).
// Throws UsageError for invalid options (validate()), inconsistent values or a program that
// cannot run.
LaunchOptions resolve_topology(LaunchOptions options,
                               const std::map<std::string, std::string>& env);

// "N" or torchrun's "MIN:MAX" into options.nnodes and options.max_nnodes (0 for "N" or "N:N");
// `what` names the value in the UsageError for anything else.
void parse_nnodes(const std::string& text, const std::string& what, LaunchOptions& options);

// Where one worker is in its job, for its environment.
struct WorkerPlace {
  int master_port = 0;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;
  int attempt = 0;  // the group's restarts so far, or the elastic round
};

// The environment contract of one worker (distributed/env.h's names): options.extra_env plus
// MASTER_ADDR (options.master_addr), MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE
// (options.nproc_per_node), GROUP_RANK, CHEXSCALE_RESTART_COUNT, CHEXSCALE_STOP_GRACE and, when
// options.worker_rdzv_timeout is set, CHEXSCALE_RDZV_TIMEOUT.
std::map<std::string, std::string> worker_environment(const LaunchOptions& options,
                                                      const WorkerPlace& place);

// How a group of workers is supervised: the launcher's grace periods (a forwarded stop gets the
// worker's --stop-grace plus kStopKillMargin) and where their output goes.
SuperviseOptions supervise_options(const LaunchOptions& options);

// Runs the local group to completion (options already resolved; not elastic()).
LaunchResult run_local_group(const LaunchOptions& options);

}  // namespace chexscale::launch
