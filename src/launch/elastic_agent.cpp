// The elastic agent's loop: join a round, run the workers under supervision, decide what the
// round's end means (see elastic_agent.h).
#include "launch/elastic_agent.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <functional>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "distributed/dist_options.h"
#include "distributed/elastic_round.h"
#include "distributed/env.h"
#include "distributed/rendezvous_gate.h"
#include "launch/elastic_rendezvous.h"
#include "launch/group_supervisor.h"
#include "launch/worker_cgroup.h"
#include "launch/worker_process.h"

namespace chexscale::launch {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = RoundEnd::Kind;

std::string node_name(const LaunchOptions& o);

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
    distributed::pass_gate(*store, o.rdzv_id, "node " + node_name(o), o.rdzv_token, timeout);
    return store;
  } catch (const Error&) {
    throw;  // the gate's refusal
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

// This agent's id on the server (its workers' mailbox): unique among the agents of every job.
std::string agent_id(const std::string& node) {
  return fmt::format("{}-{}-{}", node, ::getpid(),
                     std::chrono::steady_clock::now().time_since_epoch().count());
}

// The place of this node's workers in round `m`, as they read it from the server.
distributed::ElasticPlace place_of(const Membership& m) {
  distributed::ElasticPlace p;
  p.round = m.round;
  p.attempt = m.attempt;
  p.node_rank = m.node_rank;
  p.rank_offset = m.rank_offset;
  p.world_size = m.world_size;
  p.nodes = m.node_names;
  return p;
}

std::map<std::string, std::string> worker_env(const LaunchOptions& o, const Membership& m,
                                              const std::string& agent, int local_rank) {
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
  if (!o.rdzv_token.empty()) env[distributed::kEnvRdzvToken] = o.rdzv_token;
  env[distributed::kEnvElasticRound] = std::to_string(m.round);
  env[distributed::kEnvElasticNodes] = fmt::format("{}", fmt::join(m.node_names, ","));
  if (o.in_place) {
    env[distributed::kEnvElasticMode] = distributed::kElasticInPlace;
    env[distributed::kEnvElasticAgent] = agent;
  }
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
  rules.close_when_back = o.in_place;
  return rules;
}

// What one round's supervision ended with, besides the workers' statuses.
struct RoundWatch {
  std::optional<RoundEnd> end;  // the round's end, once this agent has seen or made one
  std::string lost;             // the store's error, when this agent lost the server
  std::string agent;            // this agent's id (--elastic in-place)
  int regroups = 0;             // rounds its workers went on into in place
};

GroupRequest regroup_in_place(ElasticRendezvous& rdzv, const LaunchOptions& o, RoundWatch& watch);

// The hook of one round: heartbeat (until the workers have exited); end the round for a silent
// node or a waiting one, or (--elastic in-place) when a worker's collective failed; follow an end
// another agent made.
GroupRequest watch_round(ElasticRendezvous& rdzv, const LaunchOptions& o, RoundWatch& watch) {
  if (!watch.lost.empty()) return GroupRequest::kNone;
  try {
    // Also while the workers stop: the next round waits for a node that is alive.
    rdzv.heartbeat();
    if (watch.end) return GroupRequest::kNone;  // acted on already
    const Membership& m = rdzv.membership();
    watch.end = rdzv.round_end();
    if (!watch.end && o.in_place) {
      if (const std::optional<std::string> why = rdzv.regroup_request(watch.agent)) {
        watch.end = rdzv.end_round({Kind::kFailure, fmt::format("node {} ({}), {}", m.node_rank,
                                                                m.node_names[m.node_rank], *why)});
      }
    }
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
  if (o.in_place && watch.end->kind != Kind::kStopped) return regroup_in_place(rdzv, o, watch);
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
// `before_join` runs once a client is connected, before each try to join.
std::optional<Membership> join_next_round(ElasticRendezvous& rdzv, const LaunchOptions& o,
                                          const RoundRules& rules, std::string error,
                                          const std::function<void()>& before_join = {}) {
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
      } catch (const UsageError&) {
        throw;  // refused by the server's gate: no retry helps
      } catch (const std::exception& e) {
        error = first_line(e.what());
      }
    }
    try {
      if (before_join) before_join();
      return rdzv.join(deadline);
    } catch (const Error&) {
      throw;  // the rendezvous' own verdict (a timeout, a finished job): no retry helps
    } catch (const std::exception& e) {
      error = first_line(e.what());
    }
  }
}

// --elastic in-place, once the round ended (not by a stop): while this node's workers keep
// running, joins the next round and posts their place in it; they build its process group.
// kKill when the job cannot go on with them (it finished elsewhere, too many failed rounds).
GroupRequest regroup_in_place(ElasticRendezvous& rdzv, const LaunchOptions& o, RoundWatch& watch) {
  const Membership before = rdzv.membership();
  log::warn("chexscale launch: round {} ended: {}; the workers of node {} stay and regroup",
            before.round, watch.end->reason, before.node_names[before.node_rank]);
  if (watch.end->kind == Kind::kFailure && rdzv.failed_rounds() > o.max_restarts) {
    return GroupRequest::kKill;  // after_round says why
  }
  std::optional<Membership> m;
  try {
    m = join_next_round(rdzv, o, round_rules(o), "");
  } catch (const std::exception& e) {
    watch.lost = first_line(e.what());
    return GroupRequest::kKill;
  }
  if (!m) return GroupRequest::kKill;  // another node's workers finished the job
  rdzv.post_place(watch.agent, place_of(*m).encode());
  log::info(
      "chexscale launch: round {}: {} node(s) ({}), world size {}; node {} ({}) keeps its "
      "workers as ranks {}..{}",
      m->round, m->nodes(), fmt::join(m->node_names, ", "), m->world_size, m->node_rank,
      m->node_names[m->node_rank], m->rank_offset, m->rank_offset + o.nproc_per_node - 1);
  ++watch.regroups;
  watch.end.reset();
  return GroupRequest::kNone;
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
                                               const std::string& program, const std::string& name,
                                               const std::string& agent) {
  log::info(
      "chexscale launch: round {}: {} node(s) ({}), world size {}; node {} ({}) runs ranks "
      "{}..{}",
      m.round, m.nodes(), fmt::join(m.node_names, ", "), m.world_size, m.node_rank, name,
      m.rank_offset, m.rank_offset + o.nproc_per_node - 1);
  std::vector<WorkerProcess> workers;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    workers.emplace_back(m.rank_offset + local, program, o.args, worker_env(o, m, agent, local),
                         worker_cgroup_files(o.worker_cgroups, local));
  }
  return workers;
}

// --elastic in-place: this node's workers, started before the node joins a round; each waits
// for the place its agent posts once the round closes (ElasticRound::standby), so
// the other nodes do not wait for a newcomer's process to start. Labelled by local rank.
std::vector<WorkerProcess> start_standby_workers(const LaunchOptions& o, const std::string& program,
                                                 const std::string& agent) {
  Membership unplaced;
  unplaced.world_size = o.nproc_per_node;
  std::vector<WorkerProcess> workers;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    std::map<std::string, std::string> env = worker_env(o, unplaced, agent, local);
    for (const char* name : {distributed::kEnvRank, distributed::kEnvWorldSize,
                             distributed::kEnvGroupRank, distributed::kEnvElasticNodes})
      env.erase(name);
    env[distributed::kEnvElasticRound] = distributed::kElasticStandby;
    workers.emplace_back(local, program, o.args, env, worker_cgroup_files(o.worker_cgroups, local));
  }
  return workers;
}

// --elastic in-place: waits until every standby worker is up (or one has exited: supervision
// reports it), so that the node joins a round only once its workers can take their place at
// once; DistError after `timeout`.
void wait_for_standby(ElasticRendezvous& rdzv, std::vector<WorkerProcess>& workers,
                      const std::string& agent, std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  while (true) {
    bool ready = true;
    for (WorkerProcess& w : workers) {
      if (w.poll_exit()) return;
      ready = ready && rdzv.in_standby(agent, w.pid());
    }
    if (ready) break;
    if (Clock::now() - start >= timeout) {
      throw DistError(fmt::format("the workers of this node were not up in standby within {:g} s",
                                  timeout.count() / 1000.0));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log::info("chexscale launch: {} worker(s) up in standby after {:.2f} s; joining", workers.size(),
            std::chrono::duration<double>(Clock::now() - start).count());
}

// --elastic in-place: puts this node's standby workers at their place in round `m`.
void place_standby_workers(ElasticRendezvous& rdzv, const LaunchOptions& o, const Membership& m,
                           const std::string& name, const std::string& agent) {
  rdzv.post_place(agent, place_of(m).encode());
  log::info(
      "chexscale launch: round {}: {} node(s) ({}), world size {}; node {} ({}) runs ranks "
      "{}..{} (its workers were waiting in standby)",
      m.round, m.nodes(), fmt::join(m.node_names, ", "), m.world_size, m.node_rank, name,
      m.rank_offset, m.rank_offset + o.nproc_per_node - 1);
}

// How this node's group of round `m` ended.
struct RoundOutcome {
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
  const Membership& m = rdzv.membership();  // the last round, also when joined in place
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
  const std::string agent = agent_id(name);
  const StopSignals signals;
  SuperviseOptions supervision = supervise_options(o);
  auto rdzv = std::make_unique<ElasticRendezvous>(connect(o, rules.join_timeout), o.rdzv_id, name,
                                                  o.nproc_per_node, rules);
  int attempts = 0;
  std::string lost;  // the store error that ended the last round's watch
  while (true) {
    // Killed, if still running, when the job completes without them.
    std::vector<WorkerProcess> workers;
    const auto standby = [&] {
      if (workers.empty()) workers = start_standby_workers(o, program, agent);
      wait_for_standby(*rdzv, workers, agent, rules.join_timeout);
    };
    const std::optional<Membership> m = join_next_round(
        *rdzv, o, rules, lost, o.in_place ? std::function<void()>(standby) : nullptr);
    lost.clear();
    if (!m) {
      LaunchResult done;
      done.attempts = attempts;
      done.summary = "the job is complete (another node's workers finished it)";
      return done;
    }
    ++attempts;
    if (o.in_place) {
      place_standby_workers(*rdzv, o, *m, name, agent);
    } else {
      workers = start_round_workers(o, *m, program, name, agent);
    }
    RoundWatch watch;
    watch.agent = agent;
    supervision.hook = [&] { return watch_round(*rdzv, o, watch); };
    const GroupOutcome outcome = supervise(workers, supervision, signals);
    if (!watch.lost.empty()) {
      log::error("chexscale launch: lost the rendezvous server at {}:{} ({}); rejoining",
                 o.master_addr, o.master_port, first_line(watch.lost));
      lost = watch.lost;
      continue;
    }
    if (std::optional<LaunchResult> r = after_round(*rdzv, o, {name, workers, outcome, watch})) {
      r->attempts = attempts;
      return *r;
    }
  }
}

}  // namespace chexscale::launch
