// The elastic agent's loop: join a round, run the workers under supervision, decide what the
// round's end means (see elastic_agent.h).
#include "launch/elastic_agent.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "launch/elastic_rendezvous.h"
#include "launch/group_supervisor.h"
#include "launch/worker_process.h"

namespace chexscale::launch {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = RoundEnd::Kind;

// A client of the rendezvous server, retried until `timeout` (it may start after the nodes).
c10::intrusive_ptr<c10d::Store> connect(const LaunchOptions& o, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(o.master_port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, options);
    store->setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(o.heartbeat_timeout) *
                      3);
    return store;
  } catch (const std::exception& e) {
    throw DistError(fmt::format("could not reach the rendezvous server at {}:{} within {} s: {}",
                                o.master_addr, o.master_port, timeout.count() / 1000.0, e.what()));
  }
}

std::string node_name(const LaunchOptions& o) {
  if (!o.node_name.empty()) return o.node_name;
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::map<std::string, std::string> worker_env(const LaunchOptions& o, const Membership& m,
                                              int local_rank) {
  WorkerPlace place;
  place.master_port = o.master_port;
  place.world_size = m.world_size;
  place.rank = m.rank_offset + local_rank;
  place.local_rank = local_rank;
  place.node_rank = m.node_rank;
  place.attempt = m.round;
  std::map<std::string, std::string> env = worker_environment(o, place);
  env[distributed::kEnvUseAgentStore] = "True";
  // The workers' store prefix: the round's number on the server, unique across its jobs.
  env[distributed::kEnvRestartCount] = std::to_string(m.attempt);
  env[distributed::kEnvRunId] = o.rdzv_id;
  env[distributed::kEnvElasticRound] = std::to_string(m.round);
  env[distributed::kEnvElasticNodes] = fmt::format("{}", fmt::join(m.node_names, ","));
  return env;
}

RoundRules round_rules(const LaunchOptions& o) {
  RoundRules rules;
  rules.min_nodes = o.nnodes;
  rules.max_nodes = o.max_nnodes;
  rules.join_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      o.worker_rdzv_timeout.value_or(distributed::kDefaultRdzvTimeout));
  rules.last_call = std::chrono::duration_cast<std::chrono::milliseconds>(o.last_call);
  rules.heartbeat_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(o.heartbeat_timeout);
  return rules;
}

// What one round's supervision ended with, besides the workers' statuses.
struct RoundWatch {
  std::optional<RoundEnd> end;  // the round's end, once this agent has seen or made one
  std::string lost;             // the store's error, when this agent lost the server
};

// The hook of one round: heartbeat (until the workers have exited); end the round for a silent
// node or a waiting one; follow an end another agent made.
GroupRequest watch_round(ElasticRendezvous& rdzv, const LaunchOptions& o, RoundWatch& watch) {
  if (!watch.lost.empty()) return GroupRequest::kNone;
  try {
    // Also while the workers stop: the next round waits for a node that is alive.
    rdzv.heartbeat();
    if (watch.end) return GroupRequest::kNone;  // acted on already
    const Membership& m = rdzv.membership();
    watch.end = rdzv.round_end();
    if (!watch.end) {
      if (const std::vector<int> stale = rdzv.stale_nodes(); !stale.empty()) {
        watch.end = rdzv.end_round(
            {Kind::kFailure, fmt::format("node {} ({}) sent no heartbeat for {:g} s", stale[0],
                                         m.node_names[stale[0]], o.heartbeat_timeout.count())});
      } else if (m.nodes() < o.max_nnodes) {
        if (const int waiting = rdzv.waiting_nodes(); waiting > 0) {
          watch.end =
              rdzv.end_round({Kind::kRestart, fmt::format("{} node(s) waiting to join", waiting)});
        }
      }
    }
  } catch (const std::exception& e) {
    watch.lost = e.what();
    return GroupRequest::kKill;
  }
  if (!watch.end) return GroupRequest::kNone;
  switch (watch.end->kind) {
    case Kind::kFailure:
      return GroupRequest::kKill;
    case Kind::kRestart:
    case Kind::kStopped:
      // Train's workers have one signal to spare: the agreed step may have been voted already.
      return GroupRequest::kStop;
  }
  return GroupRequest::kNone;
}

// The first line of a store's error (torch appends a C++ backtrace to some).
std::string first_line(const std::string& what) {
  return what.substr(0, what.find('\n'));
}

// Joins the next round through store errors (the server restarting, a connection refused or
// reset): each is logged and retried with a new client after a backoff (0.5 s, doubling to 8 s)
// until `deadline` (--rdzv-timeout from the first try), then a DistError names the last one.
// `error` is a store error already met (the round's watch lost the server): the join starts
// with a new client, since one that failed may be out of step with the server (a late reply).
std::optional<Membership> join_next_round(ElasticRendezvous& rdzv, const LaunchOptions& o,
                                          const RoundRules& rules, std::string error) {
  const auto deadline = Clock::now() + rules.join_timeout;
  std::chrono::milliseconds backoff{500};
  int retry = 0;
  while (true) {
    while (!error.empty()) {  // a new client, until one connects or the time is up
      if (Clock::now() + backoff >= deadline) {
        throw DistError(fmt::format(
            "the rendezvous server at {}:{} kept failing for --rdzv-timeout ({:g} s); the last "
            "error: {}",
            o.master_addr, o.master_port, rules.join_timeout.count() / 1000.0, error));
      }
      log::warn("chexscale launch: the rendezvous server at {}:{} failed ({}); retry {} in {:g} s",
                o.master_addr, o.master_port, error, ++retry, backoff.count() / 1000.0);
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(8000));
      try {
        rdzv.use_store(connect(o, backoff));
        error.clear();
      } catch (const std::exception& e) {
        error = first_line(e.what());
      }
    }
    try {
      return rdzv.join(deadline);
    } catch (const Error&) {
      throw;  // the rendezvous' own verdict (a timeout, a finished job): no retry helps
    } catch (const std::exception& e) {
      error = first_line(e.what());
    }
  }
}

LaunchResult stopped(const GroupOutcome& outcome, const std::vector<WorkerProcess>& workers,
                     const std::string& cause) {
  LaunchResult r;
  r.failed_rank = outcome.failed_rank;
  const std::string what = outcome.describe_stop(workers);
  if (outcome.all_preempted()) {
    r.exit_code = train::kExitPreempted;
    r.summary = fmt::format("stopped on {}: {}; exit {} (resume with --resume auto)", cause, what,
                            train::kExitPreempted);
  } else {
    r.exit_code = outcome.signal != 0 ? 128 + outcome.signal
                                      : (outcome.failed_status != 0 ? outcome.failed_status : 1);
    r.summary = fmt::format("stopped on {}: {}", cause, what);
  }
  return r;
}

std::vector<WorkerProcess> start_round_workers(const LaunchOptions& o, const Membership& m,
                                               const std::string& program,
                                               const std::string& name) {
  log::info(
      "chexscale launch: round {}: {} node(s) ({}), world size {}; node {} ({}) runs ranks "
      "{}..{}",
      m.round, m.nodes(), fmt::join(m.node_names, ", "), m.world_size, m.node_rank, name,
      m.rank_offset, m.rank_offset + o.nproc_per_node - 1);
  std::vector<WorkerProcess> workers;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    workers.emplace_back(m.rank_offset + local, program, o.args, worker_env(o, m, local));
  }
  return workers;
}

// How this node's group of round `m` ended.
struct RoundOutcome {
  const Membership& membership;
  const std::string& node;  // this node's name
  const std::vector<WorkerProcess>& workers;
  const GroupOutcome& group;
  RoundWatch& watch;  // with the server still reachable
};

// What the end of a round means for this agent: the result to return (stopped, the job
// finished, too many failed rounds), or nullopt to join the next round.
std::optional<LaunchResult> after_round(ElasticRendezvous& rdzv, const LaunchOptions& o,
                                        const RoundOutcome& round) {
  const GroupOutcome& outcome = round.group;
  std::optional<RoundEnd>& end = round.watch.end;
  if (outcome.signal != 0) {
    const std::string signal = train::stop_signal_name(outcome.signal);
    rdzv.end_round({Kind::kStopped, fmt::format("{} to node {}", signal, round.node)});
    return stopped(outcome, round.workers, signal);
  }
  if (!end) end = rdzv.round_end();
  if (outcome.preempted && (!end || end->kind == Kind::kStopped)) {
    if (!end) end = rdzv.end_round({Kind::kStopped, "a stop signal to the workers"});
    return stopped(outcome, round.workers, end->reason);
  }
  const Membership& m = round.membership;
  if (!end && outcome.failed_rank < 0) {
    rdzv.finish();
    LaunchResult r;
    r.summary = fmt::format("all {} worker(s) finished (round {}, {} node(s))", o.nproc_per_node,
                            m.round, m.nodes());
    return r;
  }
  if (!end) {
    end = rdzv.end_round({Kind::kFailure, fmt::format("rank {} on node {} ({}) ended with {}",
                                                      outcome.failed_rank, m.node_rank, round.node,
                                                      describe_exit(outcome.failed_status))});
  }
  if (end->kind == Kind::kStopped) return stopped(outcome, round.workers, end->reason);
  log::warn("chexscale launch: round {} ended: {}", m.round, end->reason);
  if (const int failed = rdzv.failed_rounds(); failed > o.max_restarts) {
    LaunchResult r;
    r.exit_code = outcome.failed_status != 0 ? outcome.failed_status : 1;
    r.failed_rank = outcome.failed_rank;
    r.summary = fmt::format("gave up after {} failed round(s) (--max-restarts {}); the last: {}",
                            failed, o.max_restarts, end->reason);
    return r;
  }
  return std::nullopt;
}

}  // namespace

LaunchResult run_elastic_group(const LaunchOptions& o) {
  const std::string program = o.program.empty() ? "/proc/self/exe" : o.program;
  const std::string name = node_name(o);
  const RoundRules rules = round_rules(o);
  const StopSignals signals;
  SuperviseOptions supervision = supervise_options(o);
  auto rdzv = std::make_unique<ElasticRendezvous>(connect(o, rules.join_timeout), o.rdzv_id, name,
                                                  o.nproc_per_node, rules);
  int attempts = 0;
  std::string lost;  // the store error that ended the last round's watch
  while (true) {
    const std::optional<Membership> m = join_next_round(*rdzv, o, rules, lost);
    lost.clear();
    if (!m) {
      LaunchResult done;
      done.attempts = attempts;
      done.summary = "the job is complete (another node's workers finished it)";
      return done;
    }
    ++attempts;
    std::vector<WorkerProcess> workers = start_round_workers(o, *m, program, name);
    RoundWatch watch;
    supervision.hook = [&] { return watch_round(*rdzv, o, watch); };
    const GroupOutcome outcome = supervise(workers, supervision, signals);
    if (!watch.lost.empty()) {
      log::error("chexscale launch: lost the rendezvous server at {}:{} ({}); rejoining",
                 o.master_addr, o.master_port, first_line(watch.lost));
      lost = watch.lost;
      continue;
    }
    if (std::optional<LaunchResult> r =
            after_round(*rdzv, o, {*m, name, workers, outcome, watch})) {
      r->attempts = attempts;
      return *r;
    }
  }
}

}  // namespace chexscale::launch
