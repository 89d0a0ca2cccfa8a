// The elastic agents' rendezvous: the launcher of every node meets the others in numbered rounds
// in a c10d TCPStore served outside the workers (`chexscale rendezvous-server`), so that losing
// any worker node, node 0's included, loses no state. In round r a node joins (a counter gives
// it its place), the round closes when max_nodes have joined, or min_nodes have and no one else
// joined for the last-call window (and every live node of round r-1 is back); places are node
// ranks. While it runs each node bumps its heartbeat counter; a node that joins a running round
// is "waiting" (the others then open the next round for it). The first node to end a round
// (a failure, a stale heartbeat, a waiting node, a stop) records why and opens round r+1.
// A node that arrives while a round runs with max_nodes waits as a spare, as torch's dynamic
// rendezvous keeps its redundant nodes: the running round is left alone and the spare is taken in
// when the next round opens (a node lost). Every key lives under the job's id, so one server
// serves job after job; a job that finished refuses nodes that were never part of it.
// Clock-free: staleness is "this counter did not change for T on my clock".
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/elastic_keys.h"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chexscale::launch {

struct RoundRules {
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds join_timeout{900000};      // --rdzv-timeout: a round must close in it
  std::chrono::milliseconds last_call{2000};           // quiet time after min_nodes joined
  std::chrono::milliseconds heartbeat_timeout{10000};  // a node silent this long is lost
  // A round after another closes as soon as every node of the one before is back, finished or
  // lost, without the last call (--elastic in-place: a node that comes later joins in place).
  bool close_when_back = false;
};

// One closed round as this node sees it.
struct Membership {
  int round = 0;
  // The round's number among all rounds of every job on this server: its workers' store prefix
  // (TORCHELASTIC_RESTART_COUNT), so that two jobs' workers never share keys.
  int attempt = 0;
  int node_rank = 0;                    // this node's place in the round
  int rank_offset = 0;                  // global rank of this node's first worker
  int world_size = 0;                   // workers in the round, all nodes
  std::vector<std::string> node_names;  // by node rank
  int nodes() const { return static_cast<int>(node_names.size()); }
};

// How a round ended.
struct RoundEnd {
  // kRestart: a membership change (the workers stop at a checkpoint, or regroup in place);
  // kFailure: a worker or node was lost (the workers are killed, or regroup in place; counts as
  // a failed round); kStopped: a stop signal (the workers stop at a checkpoint, exit 75).
  using Kind = distributed::RoundEndKind;
  Kind kind = Kind::kRestart;
  std::string reason;
};

class ElasticRendezvous {
 public:
  ElasticRendezvous(c10::intrusive_ptr<c10d::Store> store, std::string job_id,
                    std::string node_name, int nproc, RoundRules rules);

  // Joins the open round (or, while one is under way, waits as a newcomer or spare for the next,
  // saying so once) and waits until it closes. nullopt when the job has finished after this node
  // took part in it or waited for it, or after a node of this name took part in an earlier round
  // but not the last (lost, then back late: nothing left to do). Throws DistError when no round
  // takes this node in by `deadline` (moved on by join_timeout when a spare's round opens),
  // naming why, or when the job finished before this node came. A store error leaves as the
  // store's exception.
  std::optional<Membership> join(std::chrono::steady_clock::time_point deadline);
  // Carries on through another client of the store (after a store error).
  void use_store(c10::intrusive_ptr<c10d::Store> store) { store_ = std::move(store); }

  // Bumps this node's heartbeat (at most every heartbeat_timeout / 10).
  void heartbeat();
  // Nodes of the current round (other than this one) whose heartbeat has not changed for
  // heartbeat_timeout, by node rank, each marked lost on the server (the next round does not
  // wait for it); nodes whose workers finished do not count.
  std::vector<int> stale_nodes();
  // Nodes that joined after the current round closed.
  int waiting_nodes();
  // Ends the current round: the first caller's end is kept (a failure also counts one failed
  // round) and the next round opens. Returns the end recorded.
  RoundEnd end_round(const RoundEnd& end);
  // Why the current round ended, if it has.
  std::optional<RoundEnd> round_end();
  // This node's workers finished: the job is complete.
  void finish();
  bool finished();
  int failed_rounds();

  // --elastic in-place, between an agent and its own workers (distributed/elastic_round.h):
  // why one of them asked to leave the current round (its collective failed), if one did.
  std::optional<std::string> regroup_request(const std::string& agent);
  // Whether the agent's worker `pid`, started in standby, has said it is up.
  bool in_standby(const std::string& agent, int pid);
  // Posts the agent's workers' place in the current round (after join()).
  void post_place(const std::string& agent, const std::string& place);

  const Membership& membership() const { return membership_; }

 private:
  std::string key(const std::string& name) const;
  int counter(const std::string& name, int64_t add = 0);
  // Heartbeat counters last seen and when they last changed, by node rank.
  struct Seen {
    int64_t value = -1;
    std::chrono::steady_clock::time_point changed;
  };
  using TimePoint = std::chrono::steady_clock::time_point;

  // Nodes admitted to round r, once it has closed.
  std::optional<int> round_size(int r);
  // When round r is under way: counts this node as waiting in it (once, waited_in = r) and
  // returns true; throws DistError once `deadline` has passed.
  bool wait_in_running_round(int r, int& waited_in, TimePoint deadline);
  // Waits until round r closes (true) or the job finishes (false); the node that closes it sets
  // its size and attempt. Throws DistError once `deadline` has passed.
  bool wait_until_closed(int r, TimePoint deadline);
  // Whether every node of round r-1 is back in round r, finished or silent for heartbeat_timeout.
  // How many nodes of round r-1 have joined round r.
  int nodes_back(int r, int previous_nodes);
  bool previous_round_back(int r, int previous_nodes, std::map<int, Seen>& silent, TimePoint now);
  // The names of the nodes of closed round r, by node rank (none when it has not closed).
  std::vector<std::string> round_nodes(int r);
  // Whether this node (by name) took part in a round of the job but not in its last: it was lost
  // and comes back after the others finished (a pod its controller replaced late).
  bool away_at_the_end();
  // The membership of closed round r for the node at `place`; nullopt when it closed without it.
  std::optional<Membership> admitted(int r, int place);

  c10::intrusive_ptr<c10d::Store> store_;
  std::string job_id_;
  std::string node_name_;
  int nproc_;
  RoundRules rules_;
  Membership membership_;
  std::map<int, Seen> seen_;
  bool took_part_ = false;  // joined a round, or waited in one, of this job
  std::chrono::steady_clock::time_point last_beat_;
};

}  // namespace chexscale::launch
