// A worker's side of `chexscale launch --elastic in-place`: the worker outlives its round. A
// thread watches the rendezvous server for the end of the worker's round (a failure: the
// collectives in flight are abandoned at once; a node waiting to join: the ranks leave together
// at the next step); a worker whose collective failed tells its agent, which ends the round; and
// once the agent has joined the next round it posts the worker's new place (rank, world size,
// store prefix), from which the worker builds its next process group without restarting.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "distributed/env.h"

namespace chexscale::distributed {

// A node's place in one round, as its agent posts it to the node's workers.
struct ElasticPlace {
  int round = 0;
  int attempt = 0;      // the round's number on the server: the workers' store prefix
  int node_rank = 0;    // the node's place in the round
  int rank_offset = 0;  // global rank of the node's first worker
  int world_size = 0;
  std::vector<std::string> nodes;  // node names by node rank

  // "round attempt node_rank rank_offset world_size name,name,..." and back; DistError for a
  // malformed one.
  std::string encode() const;
  static ElasticPlace decode(const std::string& text);
};

class ElasticRound {
 public:
  // nullptr unless `env` has CHEXSCALE_ELASTIC_MODE=in-place; then the job id
  // (TORCHELASTIC_RUN_ID), the round (CHEXSCALE_ELASTIC_ROUND) and the agent
  // (CHEXSCALE_ELASTIC_AGENT) must be there too (UsageError naming the missing one). Connects to
  // the server at rdzv's master address and starts watching the round's end.
  static std::unique_ptr<ElasticRound> from_environment(
      const std::map<std::string, std::string>& env, const RendezvousEnv& rdzv);
  // A worker started in standby (CHEXSCALE_ELASTIC_ROUND=standby: its agent starts it before
  // joining a round, so that its start costs the other nodes no pause). It is in no round yet:
  // ended() from the start, and wait_next_place() waits for its agent's first place after the
  // ones it posted for earlier workers. `env` has MASTER_ADDR, MASTER_PORT, LOCAL_RANK and the
  // variables above. The worker prepares (builds its model and loaders), then announce_ready():
  // its agent joins a round only once every worker has.
  static std::unique_ptr<ElasticRound> standby(const std::map<std::string, std::string>& env);
  ElasticRound(c10::intrusive_ptr<c10d::Store> store, std::string job, std::string agent, int round,
               int local_rank);
  ~ElasticRound();
  ElasticRound(const ElasticRound&) = delete;
  ElasticRound& operator=(const ElasticRound&) = delete;

  int round() const { return round_; }
  bool in_standby() const { return standby_; }
  // A standby worker is ready for its place (see standby()).
  void announce_ready();
  // The round's nodes by node rank (CHEXSCALE_ELASTIC_NODES; empty when not given).
  const std::vector<std::string>& nodes() const { return nodes_; }
  // The agents ended this round (any reason but a stop signal, which the workers' own stop
  // handles): the ranks must regroup.
  bool ended() const { return ended_.load(); }
  // The reason, once the round ended by a failure: collectives of this round cannot complete.
  std::optional<std::string> abandon_reason() const;
  // Tells this node's agent that a collective of the round failed (it ends the round).
  void request_regroup(const std::string& reason);
  // Waits until the agent posts the node's place in a later round; DistError after `timeout`.
  ElasticPlace wait_next_place(std::chrono::milliseconds timeout);
  // The environment variables that put this worker at `place` (RANK, WORLD_SIZE, GROUP_RANK,
  // the store prefix, the round and its nodes), over the process's own.
  std::map<std::string, std::string> environment_for(const ElasticPlace& place) const;

 private:
  ElasticRound(c10::intrusive_ptr<c10d::Store> store, std::string job, std::string agent, int round,
               int local_rank, bool watch);
  void watch_loop();
  void check_end();

  c10::intrusive_ptr<c10d::Store> store_;
  const std::string job_;
  const std::string agent_;
  const int round_;
  const int local_rank_;
  std::vector<std::string> nodes_;
  bool standby_ = false;
  std::atomic<bool> ended_{false};
  mutable std::mutex mutex_;  // store_ and failure_
  std::optional<std::string> failure_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watch_;
};

}  // namespace chexscale::distributed
