// The local launcher: topology from options and environment, the supervision loop (output relay,
// signal forwarding, teardown on failure) and whole-group restarts.
#include "launch/local_launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "distributed/env.h"
#include "distributed/rendezvous.h"
#include "launch/group_supervisor.h"
#include "launch/worker_cgroup.h"
#include "launch/worker_process.h"

namespace chexscale::launch {
namespace {

std::optional<int> env_int(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{}='{}' is not an integer", name, it->second));
  }
}

std::map<std::string, std::string> worker_env(const LaunchOptions& o, int local_rank, int port,
                                              int attempt) {
  WorkerPlace place;
  place.master_port = port;
  place.world_size = o.nnodes * o.nproc_per_node;
  place.rank = o.node_rank * o.nproc_per_node + local_rank;
  place.local_rank = local_rank;
  place.node_rank = o.node_rank;
  place.attempt = attempt;
  return worker_environment(o, place);
}

void resolve_fixed_topology(LaunchOptions& o, const std::map<std::string, std::string>& env) {
  if (o.nnodes < 1 || o.node_rank >= o.nnodes) {
    throw UsageError(
        fmt::format("node_rank {} must be in [0, `nnodes` {})", o.node_rank, o.nnodes));
  }
  if (o.master_addr.empty()) {
    auto addr = env.find(distributed::kEnvMasterAddr);
    auto nodes = env.find("SLURM_JOB_NODELIST");
    if (addr != env.end() && !addr->second.empty()) {
      o.master_addr = addr->second;
    } else if (o.nnodes > 1 && nodes != env.end() && !nodes->second.empty()) {
      o.master_addr = distributed::first_host_of_nodelist(nodes->second);
    } else if (o.nnodes == 1) {
      o.master_addr = "127.0.0.1";
    } else {
      throw UsageError(
          "master_addr is needed for a job of several nodes (the host of node rank 0)");
    }
  }
  if (o.master_port == 0 && o.nnodes > 1) {
    o.master_port =
        env_int(env, distributed::kEnvMasterPort).value_or(distributed::kDefaultMasterPort);
  }
}

void resolve_elastic_topology(LaunchOptions& o, const std::map<std::string, std::string>& env) {
  // The rendezvous server's address: flags, PET_RDZV_ENDPOINT (taken by the caller) or
  // MASTER_ADDR / MASTER_PORT; never a guess, as no node of an elastic job is special.
  if (o.master_addr.empty()) {
    auto addr = env.find(distributed::kEnvMasterAddr);
    if (addr == env.end() || addr->second.empty()) {
      throw UsageError(fmt::format(
          "master_addr is needed for an elastic job (--nnodes {}:{}): the host of `chexscale "
          "rendezvous-server`",
          o.nnodes, o.max_nnodes));
    }
    o.master_addr = addr->second;
  }
  if (o.master_port == 0) {
    o.master_port =
        env_int(env, distributed::kEnvMasterPort).value_or(distributed::kDefaultMasterPort);
  }
  o.node_rank = -1;
}

}  // namespace

void LaunchOptions::validate() const {
  if (nproc_per_node < 1) {
    throw UsageError(fmt::format("nproc_per_node {} must be at least 1", nproc_per_node));
  }
  if (nproc_per_node > kMaxProcPerNode) {
    throw UsageError(fmt::format("nproc_per_node {} is more than {} workers on one node",
                                 nproc_per_node, kMaxProcPerNode));
  }
  if (master_port < 0 || master_port > 65535) {
    throw UsageError(fmt::format("master_port {} must be in [0, 65535]", master_port));
  }
  if (max_restarts < 0) {
    throw UsageError(fmt::format("max_restarts {} must be at least 0", max_restarts));
  }
  if (!(grace_period.count() >= 0 && grace_period <= kMaxGracePeriod)) {
    throw UsageError(fmt::format("grace_period {} s must be in [0, {}] seconds",
                                 grace_period.count(), kMaxGracePeriod.count()));
  }
  if (stop_grace < 1 || stop_grace > train::kMaxStopGrace) {
    throw UsageError(fmt::format("stop_grace {} s must be in [1, {}] seconds", stop_grace,
                                 train::kMaxStopGrace));
  }
  if (max_nnodes > 0 && max_nnodes < nnodes) {
    throw UsageError(fmt::format("max_nnodes {} is less than nnodes {}", max_nnodes, nnodes));
  }
  for (const auto& [name, value] :
       {std::pair{"last_call", last_call}, std::pair{"heartbeat_timeout", heartbeat_timeout}}) {
    if (!(value.count() > 0 && value <= kMaxGracePeriod)) {
      throw UsageError(fmt::format("{} {} s must be in (0, {}] seconds", name, value.count(),
                                   kMaxGracePeriod.count()));
    }
  }
  if (rdzv_id.empty()) throw UsageError("rdzv_id must not be empty");
  if (worker_rdzv_timeout && worker_rdzv_timeout->count() < 1) {
    throw UsageError(
        fmt::format("worker_rdzv_timeout {} s must be at least 1 s", worker_rdzv_timeout->count()));
  }
}

void parse_nnodes(const std::string& text, const std::string& what, LaunchOptions& options) {
  const size_t colon = text.find(':');
  const auto number = [&](const std::string& part) {
    size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size()) {
      throw UsageError(fmt::format("{}='{}' is not N or MIN:MAX", what, text));
    }
    return value;
  };
  options.nnodes = number(text.substr(0, colon));
  options.max_nnodes = 0;
  if (colon == std::string::npos) return;
  const int max = number(text.substr(colon + 1));
  if (max < options.nnodes || options.nnodes < 1) {
    throw UsageError(
        fmt::format("{}='{}': MIN must be at least 1 and MAX at least MIN", what, text));
  }
  if (max != options.nnodes) options.max_nnodes = max;
}

TorchrunFlags read_torchrun_flags(const std::map<std::string, std::string>& env) {
  auto text = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  TorchrunFlags f;
  if (auto nnodes = text("PET_NNODES")) {
    LaunchOptions parsed;
    parse_nnodes(*nnodes, "PET_NNODES", parsed);
    f.nnodes = parsed.nnodes;
    if (parsed.max_nnodes > 0) f.max_nnodes = parsed.max_nnodes;
  }
  f.nproc_per_node = env_int(env, "PET_NPROC_PER_NODE");
  f.node_rank = env_int(env, "PET_NODE_RANK");
  f.max_restarts = env_int(env, "PET_MAX_RESTARTS");
  f.master_addr = text("PET_MASTER_ADDR");
  f.master_port = env_int(env, "PET_MASTER_PORT");
  f.rdzv_id = text("PET_RDZV_ID");
  if (auto endpoint = text("PET_RDZV_ENDPOINT")) {
    // "host", "host:port", "[v6 address]:port" (a bare v6 address has no port).
    std::string host = *endpoint, port;
    if (endpoint->front() == '[' && endpoint->find(']') != std::string::npos) {
      const size_t close = endpoint->find(']');
      host = endpoint->substr(1, close - 1);
      if (endpoint->compare(close + 1, 1, ":") == 0) port = endpoint->substr(close + 2);
    } else if (const size_t colon = endpoint->find(':');
               colon != std::string::npos && colon == endpoint->rfind(':')) {
      host = endpoint->substr(0, colon);
      port = endpoint->substr(colon + 1);
    }
    f.master_addr = host;
    if (!port.empty()) {
      try {
        size_t used = 0;
        f.master_port = std::stoi(port, &used);
        if (used != port.size()) throw std::invalid_argument(port);
      } catch (const std::exception&) {
        throw UsageError(fmt::format("PET_RDZV_ENDPOINT='{}': the port '{}' is not an integer",
                                     *endpoint, port));
      }
    }
  }
  return f;
}

LaunchOptions resolve_topology(LaunchOptions o, const std::map<std::string, std::string>& env) {
  o.validate();
  if (o.nnodes < 0) {
    o.nnodes = env_int(env, "NNODES").value_or(env_int(env, "SLURM_NNODES").value_or(1));
  }
  if (o.node_rank < 0) {
    o.node_rank =
        env_int(env, "JOB_COMPLETION_INDEX")
            .value_or(env_int(env, "SLURM_NODEID").value_or(env_int(env, "NODE_RANK").value_or(0)));
  }
  if (o.elastic()) {
    resolve_elastic_topology(o, env);
  } else {
    resolve_fixed_topology(o, env);
  }
  o.validate();  // the values taken from the environment too
  if (!o.program.empty() && ::access(o.program.c_str(), X_OK) != 0) {
    throw UsageError(
        fmt::format("program {}: not an executable ({})", o.program, std::strerror(errno)));
  }
  if (o.args.empty()) throw UsageError("nothing to launch: give the worker's command after --");
  check_worker_cgroups(o.worker_cgroups, o.nproc_per_node);
  return o;
}

SuperviseOptions supervise_options(const LaunchOptions& options) {
  SuperviseOptions s;
  s.grace_period = options.grace_period;
  s.stop_grace = std::chrono::seconds(options.stop_grace) + kStopKillMargin;
  s.output_fd = options.output_fd;
  s.error_fd = options.error_fd;
  return s;
}

namespace {

std::optional<LaunchResult> stopped_result(const GroupOutcome& outcome,
                                           const std::vector<WorkerProcess>& workers) {
  if (outcome.signal == 0 && !outcome.preempted) return std::nullopt;
  LaunchResult result;
  result.failed_rank = outcome.failed_rank;
  const std::string what = outcome.describe_stop(workers);
  const std::string cause = outcome.signal != 0 ? train::stop_signal_name(outcome.signal)
                                                : "a stop signal to the workers";
  if (outcome.all_preempted()) {
    result.exit_code = train::kExitPreempted;
    result.summary = fmt::format("stopped on {}: {}; exit {} (resume with --resume auto)", cause,
                                 what, train::kExitPreempted);
  } else {
    result.exit_code = outcome.signal != 0 ? 128 + outcome.signal : outcome.failed_status;
    result.summary = fmt::format("stopped on {}: {}", cause, what);
  }
  return result;
}

}  // namespace

std::map<std::string, std::string> worker_environment(const LaunchOptions& o,
                                                      const WorkerPlace& place) {
  std::map<std::string, std::string> env = o.extra_env;
  env[distributed::kEnvMasterAddr] = o.master_addr;
  env[distributed::kEnvMasterPort] = std::to_string(place.master_port);
  env[distributed::kEnvWorldSize] = std::to_string(place.world_size);
  env[distributed::kEnvRank] = std::to_string(place.rank);
  env[distributed::kEnvLocalRank] = std::to_string(place.local_rank);
  env[distributed::kEnvLocalWorldSize] = std::to_string(o.nproc_per_node);
  env[distributed::kEnvGroupRank] = std::to_string(place.node_rank);
  env[distributed::kEnvAttempt] = std::to_string(place.attempt);
  env[distributed::kEnvStopGrace] = std::to_string(o.stop_grace);
  if (o.worker_rdzv_timeout) {
    env[distributed::kEnvRdzvTimeout] = std::to_string(o.worker_rdzv_timeout->count());
  }
  return env;
}

LaunchResult run_local_group(const LaunchOptions& options) {
  const std::string program = options.program.empty() ? "/proc/self/exe" : options.program;
  const StopSignals signals;
  const SuperviseOptions supervision = supervise_options(options);
  LaunchResult result;
  for (int attempt = 0; attempt <= options.max_restarts; ++attempt) {
    const int port = options.master_port > 0 ? options.master_port : distributed::pick_free_port();
    log::info("chexscale launch: starting {} worker(s), ranks {}..{} of {}, store {}:{}{}",
              options.nproc_per_node, options.node_rank * options.nproc_per_node,
              (options.node_rank + 1) * options.nproc_per_node - 1,
              options.nnodes * options.nproc_per_node, options.master_addr, port,
              attempt > 0 ? fmt::format(" (restart {} of {})", attempt, options.max_restarts) : "");
    std::vector<WorkerProcess> workers;
    for (int local = 0; local < options.nproc_per_node; ++local) {
      workers.emplace_back(options.node_rank * options.nproc_per_node + local, program,
                           options.args, worker_env(options, local, port, attempt),
                           worker_cgroup_files(options.worker_cgroups, local));
    }
    const GroupOutcome outcome = supervise(workers, supervision, signals);
    if (auto stopped = stopped_result(outcome, workers)) {
      stopped->attempts = attempt + 1;
      return *stopped;
    }
    result.attempts = attempt + 1;
    result.failed_rank = outcome.failed_rank;
    result.exit_code = outcome.failed_status;
    if (outcome.failed_rank < 0) {
      result.summary = fmt::format("all {} worker(s) finished", options.nproc_per_node);
      return result;
    }
    result.summary =
        fmt::format("rank {} failed with {} (attempt {} of {})", outcome.failed_rank,
                    describe_exit(outcome.failed_status), attempt + 1, options.max_restarts + 1);
    if (attempt < options.max_restarts) {
      log::warn("chexscale launch: {}; restarting the local group", result.summary);
    }
  }
  return result;
}

}  // namespace chexscale::launch
