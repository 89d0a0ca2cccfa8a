// The environment contract between launchers and workers: who this process is in the job (rank,
// world size, local rank) and where the rendezvous store is, read from torchrun's names, else
// OpenMPI, MPICH/PMI, Slurm or a Kubernetes Indexed Job, with explicit overrides on top. What a
// launcher leaves out (PyTorch's env:// needs only RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)
// is inferred, and the source says how; only contradictions are refused.
// detect_environment() is a pure function of a name -> value map, so every convention is testable.
#pragma once

#include <map>
#include <string>

namespace chexscale::distributed {

struct DistOptions;

// One resolved value and where it came from ("RANK", "OMPI_COMM_WORLD_SIZE", "default: single
// process", ...); an override from DistOptions names its field in backticks ("`rank`"), which the
// CLI shows as the flag.
template <typename T>
struct EnvField {
  T value{};
  std::string source;
};

struct RendezvousEnv {
  std::string convention;  // torchrun | OpenMPI | MPICH/PMI | Slurm | Kubernetes Indexed Job | none
  EnvField<int> rank;
  EnvField<int> world_size;
  EnvField<int> local_rank;
  EnvField<int> local_world_size;
  EnvField<int> node_rank;
  EnvField<std::string> master_addr;
  EnvField<int> master_port;
  // True when the launcher's agent already serves the store at master_addr:master_port (torchrun
  // says so with TORCHELASTIC_USE_AGENT_STORE=True): then every rank, rank 0 included, is a client.
  EnvField<bool> agent_store;
  // The prefix of every store key ("" = none). On the agent's store, which outlives a restarted
  // attempt, each attempt has its own: "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as torch's
  // own workers use.
  EnvField<std::string> store_prefix;
  // On the agent's store: the job's id (TORCHELASTIC_RUN_ID) and token (CHEXSCALE_RDZV_TOKEN,
  // "" = none), with which the rendezvous server's gate admits this rank.
  std::string run_id;
  std::string rdzv_token;

  // True when every rank of the job runs on this host (then loopback is enough).
  bool single_node() const { return local_world_size.value == world_size.value; }
};

// torchrun's default rendezvous port.
inline constexpr int kDefaultMasterPort = 29500;

// The variables a launcher (chexscale launch, torchrun) sets for each worker. torchrun's, which
// detect_environment() reads:
inline constexpr const char* kEnvRank = "RANK";
inline constexpr const char* kEnvWorldSize = "WORLD_SIZE";
inline constexpr const char* kEnvLocalRank = "LOCAL_RANK";
inline constexpr const char* kEnvLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kEnvGroupRank = "GROUP_RANK";  // the node's rank
inline constexpr const char* kEnvMasterAddr = "MASTER_ADDR";
inline constexpr const char* kEnvMasterPort = "MASTER_PORT";
inline constexpr const char* kEnvUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";  // "True"
inline constexpr const char* kEnvRestartCount = "TORCHELASTIC_RESTART_COUNT";     // store prefix
inline constexpr const char* kEnvRunId = "TORCHELASTIC_RUN_ID";
// chexscale launch's own, which `chexscale train` reads: the group's attempt (its restarts, or
// the elastic round), the elastic round and its nodes' names ("a,b,c"), and the values of
// train's --stop-grace and --rdzv-timeout (CHEXSCALE_<FLAG>, as every flag's variable).
inline constexpr const char* kEnvAttempt = "CHEXSCALE_RESTART_COUNT";
inline constexpr const char* kEnvElasticRound = "CHEXSCALE_ELASTIC_ROUND";
inline constexpr const char* kEnvElasticNodes = "CHEXSCALE_ELASTIC_NODES";
// With `launch --elastic in-place`: "in-place", and the agent's id (its mailbox on the server).
inline constexpr const char* kEnvElasticMode = "CHEXSCALE_ELASTIC_MODE";
inline constexpr const char* kEnvElasticAgent = "CHEXSCALE_ELASTIC_AGENT";
inline constexpr const char* kElasticInPlace = "in-place";
// CHEXSCALE_ELASTIC_ROUND of a worker started before its node joined a round: it waits for its
// place (ElasticRound::standby).
inline constexpr const char* kElasticStandby = "standby";
inline constexpr const char* kEnvStopGrace = "CHEXSCALE_STOP_GRACE";
inline constexpr const char* kEnvRdzvTimeout = "CHEXSCALE_RDZV_TIMEOUT";

// Resolves the contract from `env` (normally the process environment) and the explicit overrides
// in `overrides` (rank, world_size, ..., master_addr, master_port; -1 / "" = not given).
// A missing local rank or local world size is inferred: from another convention that describes
// the same process (same rank and world size), else from a loopback MASTER_ADDR (every rank is on
// this host), else the fewest processes the local rank allows. Throws UsageError for what cannot
// be inferred or contradicts (RANK without WORLD_SIZE, RANK >= WORLD_SIZE, two conventions giving
// the same rank different local ranks, a non-integer value, a multi-node job without a master
// address, ...).
RendezvousEnv detect_environment(const std::map<std::string, std::string>& env,
                                 const DistOptions& overrides);

// The current process environment as a map.
std::map<std::string, std::string> process_environment();

// First host of a Slurm host list: "node[03-05,9],gpu1" -> "node03".
std::string first_host_of_nodelist(const std::string& nodelist);

// Tasks on node `node_index` from Slurm's SLURM_TASKS_PER_NODE form "2(x3),1" (-1 if unknown).
int tasks_on_node(const std::string& tasks_per_node, int node_index);

}  // namespace chexscale::distributed
