// Reads the launcher -> worker environment contract; see env.h for the conventions and their order.
#include "distributed/env.h"
#include "distributed/rendezvous_gate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <optional>

#include "common/error.h"
#include "distributed/dist_options.h"

extern char** environ;

namespace chexscale::distributed {
namespace {

using Env = std::map<std::string, std::string>;

// The names one launcher family uses; an empty name means the family has no such variable.
struct Convention {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

// In precedence order (DESIGN.md). Slurm's local world size needs its own parsing.
constexpr Convention kConventions[] = {
    {"torchrun", kEnvRank, kEnvWorldSize, kEnvLocalRank, kEnvLocalWorldSize},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", ""},
};

std::optional<std::string> lookup(const Env& env, const std::string& name) {
  if (name.empty()) return std::nullopt;
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

int parse_int(const std::string& what, const std::string& text) {
  size_t pos = 0;
  int value = 0;
  try {
    value = std::stoi(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != text.size()) {
    throw UsageError(fmt::format("{}='{}' is not an integer", what, text));
  }
  return value;
}

std::optional<EnvField<int>> read_int(const Env& env, const std::string& name) {
  auto text = lookup(env, name);
  if (!text) return std::nullopt;
  return EnvField<int>{parse_int(name, *text), name};
}

[[noreturn]] void partial(const std::string& present, const std::string& missing,
                          const std::string& convention) {
  throw UsageError(fmt::format("{} is set but {} is not: the {} convention needs both", present,
                               missing, convention));
}

// Reads a (value, companion) pair that must be given together.
std::pair<std::optional<EnvField<int>>, std::optional<EnvField<int>>> read_pair(
    const Env& env, const std::string& first, const std::string& second,
    const std::string& convention) {
  auto a = read_int(env, first);
  auto b = read_int(env, second);
  if (a && !b) partial(first, second, convention);
  if (b && !a) partial(second, first, convention);
  return {a, b};
}

// Slurm sets the tasks on this node only in compressed lists ("2(x3),1") unless the job asked
// for --ntasks-per-node.
std::optional<EnvField<int>> slurm_local_world(const Env& env) {
  if (auto n = read_int(env, "SLURM_NTASKS_PER_NODE")) return n;
  const int node = read_int(env, "SLURM_NODEID").value_or(EnvField<int>{0, ""}).value;
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (auto text = lookup(env, name)) {
      const int n = tasks_on_node(*text, node);
      if (n > 0) return EnvField<int>{n, std::string(name) + " at SLURM_NODEID"};
    }
  }
  return std::nullopt;
}

// What one convention says about this process; any field may be missing.
struct Placement {
  std::optional<EnvField<int>> rank, world_size, local_rank, local_world_size;
};

Placement read_placement(const Env& env, const Convention& c) {
  return {
      read_int(env, c.rank), read_int(env, c.world_size), read_int(env, c.local_rank),
      c.local_world_size[0] != '\0' ? read_int(env, c.local_world_size) : slurm_local_world(env)};
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// Two conventions that give this process the same rank and world size must agree on `what`.
void expect_agreement(const std::optional<EnvField<int>>& mine,
                      const std::optional<EnvField<int>>& theirs, const RendezvousEnv& out,
                      const char* what) {
  if (mine && theirs && mine->value != theirs->value) {
    throw UsageError(fmt::format(
        "{}={} but {}={}: both name rank {} of {}, so they contradict each other on the {}",
        mine->source, mine->value, theirs->source, theirs->value, out.rank.value,
        out.world_size.value, what));
  }
}

// Fills the local rank and local world size from `own` (the convention that named the rank),
// inferring what it leaves out. Another convention corroborates when it gives the same rank and
// world size; one that gives others describes an outer launcher (srun or mpirun starting one
// launcher per node) and is not used.
void resolve_local(const Env& env, const Convention& own, RendezvousEnv& out) {
  Placement p = read_placement(env, own);
  for (const Convention& c : kConventions) {
    if (&c == &own) continue;
    Placement other;
    try {
      other = read_placement(env, c);
    } catch (const UsageError&) {
      continue;  // a value that is not an integer corroborates nothing
    }
    if (!other.rank || !other.world_size || other.rank->value != out.rank.value ||
        other.world_size->value != out.world_size.value) {
      continue;
    }
    expect_agreement(p.local_rank, other.local_rank, out, "local rank");
    expect_agreement(p.local_world_size, other.local_world_size, out, "local world size");
    const std::string agrees = fmt::format(" ({} gives the same rank and world size)", c.name);
    if (!p.local_rank && other.local_rank) {
      p.local_rank = EnvField<int>{other.local_rank->value, other.local_rank->source + agrees};
    }
    if (!p.local_world_size && other.local_world_size) {
      p.local_world_size =
          EnvField<int>{other.local_world_size->value, other.local_world_size->source + agrees};
    }
  }
  if (!p.local_world_size) {
    const auto addr = lookup(env, kEnvMasterAddr);
    if (addr && is_loopback(*addr)) {
      p.local_world_size = EnvField<int>{
          out.world_size.value,
          fmt::format("inferred: MASTER_ADDR {} is loopback, so every rank is on this host",
                      *addr)};
    } else if (p.local_rank) {
      p.local_world_size =
          EnvField<int>{std::max(1, p.local_rank->value + 1),
                        fmt::format("inferred: {} + 1, the fewest processes on this host (set "
                                    "LOCAL_WORLD_SIZE if it runs more)",
                                    p.local_rank->source)};
    } else {
      p.local_world_size = EnvField<int>{1, "default: one process on this node"};
    }
  }
  if (!p.local_rank) {
    const int local_world = p.local_world_size->value;
    if (local_world == 1) {
      p.local_rank = EnvField<int>{0, p.local_world_size->source};
    } else if (local_world == out.world_size.value) {
      p.local_rank = EnvField<int>{out.rank.value, "inferred: the rank, as every rank is here"};
    } else {
      p.local_rank = EnvField<int>{out.rank.value % std::max(1, local_world),
                                   "inferred: rank mod local world size (hosts in rank order)"};
    }
  }
  out.local_rank = *p.local_rank;
  out.local_world_size = *p.local_world_size;
}

// Fills rank, world and local fields from the first convention that names a rank or world size.
void detect_ranks(const Env& env, RendezvousEnv& out) {
  // An Indexed Job pod gives its node index; torchrun's RANK (set by a launcher inside the pod)
  // takes precedence over it.
  if (lookup(env, "JOB_COMPLETION_INDEX") && !lookup(env, kEnvRank)) {
    const std::string conv = "Kubernetes Indexed Job";
    out.convention = conv;
    out.node_rank = *read_int(env, "JOB_COMPLETION_INDEX");
    auto [lr, lw] = read_pair(env, kEnvLocalRank, kEnvLocalWorldSize, conv);
    out.local_rank = lr.value_or(EnvField<int>{0, "default: one process per pod"});
    out.local_world_size = lw.value_or(EnvField<int>{1, "default: one process per pod"});
    if (auto world = read_int(env, kEnvWorldSize)) {
      out.world_size = *world;
    } else if (auto nnodes = read_int(env, "NNODES")) {
      out.world_size = {nnodes->value * out.local_world_size.value, "NNODES x local world size"};
    } else {
      throw UsageError(
          "JOB_COMPLETION_INDEX is set but neither WORLD_SIZE nor NNODES is: an Indexed Job's "
          "pods must say how many processes the job has");
    }
    out.rank = {out.node_rank.value * out.local_world_size.value + out.local_rank.value,
                "JOB_COMPLETION_INDEX x local world size + local rank"};
    return;
  }
  for (const Convention& c : kConventions) {
    auto [rank, world] = read_pair(env, c.rank, c.world_size, c.name);
    if (!rank) continue;
    out.convention = c.name;
    out.rank = *rank;
    out.world_size = *world;
    resolve_local(env, c, out);
    return;
  }
  out.convention = "none";
  out.rank = {0, "default: single process"};
  out.world_size = {1, "default: single process"};
  out.local_rank = {0, "default: single process"};
  out.local_world_size = {1, "default: single process"};
}

// Who serves the store. torch's workers decide in _create_c10d_store (torch/distributed/
// rendezvous.py): with TORCHELASTIC_USE_AGENT_STORE=True (exactly "True") the agent of node 0
// already serves a TCPStore at MASTER_ADDR:MASTER_PORT and every rank, rank 0 included, is a
// client. torchrun 1.13 says so for its static rendezvous (no --rdzv_backend; the agent's
// _start_workers sets it when the backend is "static"); torch 2.x also for the c10d backend,
// whose rendezvous store it shares unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1. Otherwise
// MASTER_PORT is a port the agent picked and rank 0 serves the store there, new each attempt.
// torch 1.13 keys the agent's store by attempt, PrefixStore("/worker/attempt_<RESTART_COUNT>");
// torch 2.x leaves the prefix out because it makes a new store for every retry. The prefix is
// kept for both: only our ranks read these keys, so it need only be the same on all of them, and
// it keeps a restarted attempt off the last attempt's keys on any store that outlives it.
void detect_store(const Env& env, RendezvousEnv& out) {
  const auto use = lookup(env, kEnvUseAgentStore);
  if (!use || *use != "True") {
    out.agent_store = {false, use ? kEnvUseAgentStore : "default: rank 0 serves it"};
    out.store_prefix = {"", "default: a new store each attempt"};
    return;
  }
  out.agent_store = {true, kEnvUseAgentStore};
  out.run_id = lookup(env, kEnvRunId).value_or("");
  out.rdzv_token = lookup(env, kEnvRdzvToken).value_or("");
  const auto attempt = read_int(env, kEnvRestartCount);
  out.store_prefix = {fmt::format("/worker/attempt_{}", attempt ? attempt->value : 0),
                      attempt ? kEnvRestartCount : "default: the first attempt"};
}

void apply_overrides(const DistOptions& o, RendezvousEnv& out) {
  auto apply = [](EnvField<int>& field, int value, const char* flag) {
    if (value >= 0) field = {value, flag};
  };
  apply(out.rank, o.rank, "`rank`");
  apply(out.world_size, o.world_size, "`world_size`");
  apply(out.local_rank, o.local_rank, "`local_rank`");
  apply(out.local_world_size, o.local_world_size, "`local_world_size`");
  if (!o.master_addr.empty()) out.master_addr = {o.master_addr, "`master_addr`"};
  if (o.master_port >= 0) out.master_port = {o.master_port, "`master_port`"};
}

// The index of this host in the job, where the launcher says it; else derived from the rank.
EnvField<int> node_rank_of(const Env& env, const RendezvousEnv& e) {
  if (auto group = read_int(env, kEnvGroupRank); group && e.convention == "torchrun") return *group;
  if (auto node = read_int(env, "SLURM_NODEID"); node && e.convention == "Slurm") return *node;
  return {e.rank.value / std::max(1, e.local_world_size.value), "derived: rank / local world size"};
}

std::string describe(const EnvField<int>& f) {
  return fmt::format("{} (from {})", f.value, f.source);
}

void validate(const RendezvousEnv& e) {
  if (e.world_size.value < 1) {
    throw UsageError(fmt::format("world size {} must be at least 1", describe(e.world_size)));
  }
  if (e.rank.value < 0 || e.rank.value >= e.world_size.value) {
    throw UsageError(fmt::format("the rank {} must be in [0, world size {})", describe(e.rank),
                                 describe(e.world_size)));
  }
  if (e.local_world_size.value < 1 || e.local_world_size.value > e.world_size.value) {
    throw UsageError(fmt::format("local world size {} must be in [1, world size {}]",
                                 describe(e.local_world_size), describe(e.world_size)));
  }
  if (e.local_rank.value < 0 || e.local_rank.value >= e.local_world_size.value) {
    throw UsageError(fmt::format("local rank {} must be in [0, local world size {})",
                                 describe(e.local_rank), describe(e.local_world_size)));
  }
  if (e.master_port.value < 1 || e.master_port.value > 65535) {
    throw UsageError(fmt::format("master port {} must be in [1, 65535]", describe(e.master_port)));
  }
}

}  // namespace

RendezvousEnv detect_environment(const Env& env, const DistOptions& overrides) {
  RendezvousEnv out;
  detect_ranks(env, out);
  detect_store(env, out);
  if (auto addr = lookup(env, kEnvMasterAddr)) out.master_addr = {*addr, kEnvMasterAddr};
  if (out.master_addr.value.empty() && out.convention == "Slurm") {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (auto list = lookup(env, name)) {
        out.master_addr = {first_host_of_nodelist(*list), std::string("first host of ") + name};
        break;
      }
    }
  }
  out.master_port = read_int(env, kEnvMasterPort)
                        .value_or(EnvField<int>{kDefaultMasterPort, "default: torchrun's port"});
  apply_overrides(overrides, out);
  if (out.node_rank.source.empty()) out.node_rank = node_rank_of(env, out);
  validate(out);
  if (out.master_addr.value.empty()) {
    if (!out.single_node()) {
      throw UsageError(fmt::format(
          "a job of {} processes with {} on this node spans several hosts: set MASTER_ADDR (or "
          "`master_addr`) to the host of rank 0",
          out.world_size.value, out.local_world_size.value));
    }
    out.master_addr = {"127.0.0.1", "default: single-node job"};
  }
  return out;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** p = environ; p != nullptr && *p != nullptr; ++p) {
    const std::string entry(*p);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string first_host_of_nodelist(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  const size_t close = first.find(']', open);
  if (close == std::string::npos) throw UsageError("malformed Slurm host list '" + nodelist + "'");
  const std::string range = first.substr(open + 1, close - open - 1);
  const std::string head = range.substr(0, range.find_first_of(",-"));
  return first.substr(0, open) + head + first.substr(close + 1);
}

int tasks_on_node(const std::string& tasks_per_node, int node_index) {
  int node = 0;
  size_t pos = 0;
  while (pos < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', pos);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(pos, end - pos);
    int count = 0, repeat = 1;
    const size_t paren = item.find("(x");
    try {
      count = std::stoi(item.substr(0, paren));
      if (paren != std::string::npos) repeat = std::stoi(item.substr(paren + 2));
    } catch (const std::exception&) {
      return -1;
    }
    if (node_index < node + repeat) return count;
    node += repeat;
    pos = end + 1;
  }
  return -1;
}

}  // namespace chexscale::distributed
