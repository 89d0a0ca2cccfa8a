// The worker's link to its agent in `--elastic in-place` jobs (see elastic_round.h).
#include "distributed/elastic_round.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <mutex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "distributed/elastic_keys.h"
#include "distributed/rendezvous_gate.h"
#include "distributed/store_io.h"

namespace chexscale::distributed {
namespace {

using std::chrono::milliseconds;

// How often the watch thread looks at the server (a round's end is noticed within this).
constexpr milliseconds kWatchInterval{100};

const std::string& required(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end() || it->second.empty()) {
    throw UsageError(fmt::format("{}={} needs {} (set by `chexscale launch --elastic in-place`)",
                                 kEnvElasticMode, kElasticInPlace, name));
  }
  return it->second;
}

int to_int(const std::string& text, const char* what) {
  try {
    size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw UsageError(fmt::format("{} must be an integer, got '{}'", what, text));
}

// A client of the rendezvous server at `addr`:`port`, through its gate as `who`.
c10::intrusive_ptr<c10d::Store> connect(const std::string& addr, int port, const std::string& job,
                                        const std::string& token, const std::string& who) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(30);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(addr, options);
  } catch (const std::exception& e) {
    throw DistError(fmt::format("{} could not reach the rendezvous server at {}:{}: {}", who, addr,
                                port, e.what()));
  }
  pass_gate(*store, job, who, token, options.timeout);
  return store;
}

// The agent's place for its workers in a round after `after`, polled every 20 ms (the store
// under `mutex`, when given); DistError after `timeout`, saying `what` ("round 3 ended but").
ElasticPlace wait_place_after(c10d::Store& store, std::mutex* mutex, const std::string& job,
                              const std::string& agent, int after, milliseconds timeout,
                              const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string latest = agent_key(job, agent, "latest");
  while (true) {
    {
      std::unique_lock<std::mutex> lock;
      if (mutex != nullptr) lock = std::unique_lock<std::mutex>(*mutex);
      if (store.check({latest})) {
        const int round = to_int(store_string(store.get(latest)), "the agent's latest round");
        if (round > after) {
          return ElasticPlace::decode(
              store_string(store.get(agent_key(job, agent, fmt::format("place/{}", round)))));
        }
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw DistError(
          fmt::format("{} this node's agent posted no place in a later round within "
                      "{:g} s",
                      what, static_cast<double>(timeout.count()) / 1000.0));
    }
    std::this_thread::sleep_for(kStorePoll);
  }
}

// RANK, WORLD_SIZE, GROUP_RANK, the store prefix, the round and its nodes for local rank
// `local_rank` at `p`.
std::map<std::string, std::string> place_environment(const ElasticPlace& p, int local_rank) {
  return {{kEnvRank, std::to_string(p.rank_offset + local_rank)},
          {kEnvWorldSize, std::to_string(p.world_size)},
          {kEnvGroupRank, std::to_string(p.node_rank)},
          {kEnvRestartCount, std::to_string(p.attempt)},
          {kEnvAttempt, std::to_string(p.round)},
          {kEnvElasticRound, std::to_string(p.round)},
          {kEnvElasticNodes, fmt::format("{}", fmt::join(p.nodes, ","))}};
}

}  // namespace

std::string ElasticPlace::encode() const {
  return fmt::format("{} {} {} {} {} {}", round, attempt, node_rank, rank_offset, world_size,
                     fmt::join(nodes, ","));
}

ElasticPlace ElasticPlace::decode(const std::string& text) {
  std::istringstream in(text);
  ElasticPlace p;
  std::string names;
  if (!(in >> p.round >> p.attempt >> p.node_rank >> p.rank_offset >> p.world_size >> names) ||
      p.world_size < 1 || p.node_rank < 0 || p.rank_offset < 0) {
    throw DistError(fmt::format("the agent posted a malformed place '{}'", text));
  }
  std::istringstream list(names);
  for (std::string name; std::getline(list, name, ',');)
    p.nodes.push_back(name);
  if (p.node_rank >= static_cast<int>(p.nodes.size())) {
    throw DistError(fmt::format("the agent posted a malformed place '{}'", text));
  }
  return p;
}

std::unique_ptr<ElasticRound> ElasticRound::from_environment(
    const std::map<std::string, std::string>& env, const RendezvousEnv& rdzv) {
  const auto mode = env.find(kEnvElasticMode);
  if (mode == env.end() || mode->second.empty()) return nullptr;
  if (mode->second != kElasticInPlace) {
    throw UsageError(fmt::format("{} must be '{}' or unset, got '{}'", kEnvElasticMode,
                                 kElasticInPlace, mode->second));
  }
  const std::string& job = required(env, kEnvRunId);
  const std::string& agent = required(env, kEnvElasticAgent);
  const int round = to_int(required(env, kEnvElasticRound), kEnvElasticRound);
  auto store = connect(rdzv.master_addr.value, rdzv.master_port.value, job, rdzv.rdzv_token,
                       fmt::format("rank {}'s round watch", rdzv.rank.value));
  auto watch =
      std::make_unique<ElasticRound>(std::move(store), job, agent, round, rdzv.local_rank.value);
  if (const auto nodes = env.find(kEnvElasticNodes); nodes != env.end()) {
    std::istringstream list(nodes->second);
    for (std::string name; std::getline(list, name, ',');)
      watch->nodes_.push_back(name);
  }
  return watch;
}

std::unique_ptr<ElasticRound> ElasticRound::standby(const std::map<std::string, std::string>& env) {
  const std::string& job = required(env, kEnvRunId);
  const std::string& agent = required(env, kEnvElasticAgent);
  const int local_rank = to_int(required(env, kEnvLocalRank), kEnvLocalRank);
  const auto token = env.find(kEnvRdzvToken);
  auto store = connect(
      required(env, kEnvMasterAddr), to_int(required(env, kEnvMasterPort), kEnvMasterPort), job,
      token == env.end() ? "" : token->second, fmt::format("local rank {} in standby", local_rank));
  // The agent may have posted places for earlier workers: this one's is in a later round. The
  // agent joins a round only once this worker has announced itself, so none is missed.
  const std::string latest = agent_key(job, agent, "latest");
  const int after = store->check({latest})
                        ? to_int(store_string(store->get(latest)), "the agent's latest round")
                        : -1;
  std::unique_ptr<ElasticRound> round(
      new ElasticRound(std::move(store), job, agent, after, local_rank, /*watch=*/false));
  round->standby_ = true;
  round->ended_ = true;
  return round;
}

void ElasticRound::announce_ready() {
  std::lock_guard<std::mutex> lock(mutex_);
  store_->set(agent_key(job_, agent_, fmt::format("standby/{}", ::getpid())), store_bytes("1"));
  log::info("local rank {} waits in standby for its node's place in a round", local_rank_);
}

ElasticRound::ElasticRound(c10::intrusive_ptr<c10d::Store> store, std::string job,
                           std::string agent, int round, int local_rank)
    : ElasticRound(std::move(store), std::move(job), std::move(agent), round, local_rank, true) {}

ElasticRound::ElasticRound(c10::intrusive_ptr<c10d::Store> store, std::string job,
                           std::string agent, int round, int local_rank, bool watch)
    : store_(std::move(store)),
      job_(std::move(job)),
      agent_(std::move(agent)),
      round_(round),
      local_rank_(local_rank) {
  if (watch) watch_ = std::thread([this] { watch_loop(); });
}

ElasticRound::~ElasticRound() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watch_.joinable()) watch_.join();
}

void ElasticRound::watch_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!ended_ && !wake_.wait_for(lock, kWatchInterval, [this] { return stopping_; })) {
    try {
      check_end();
    } catch (const std::exception& e) {
      // The server is unreachable for now: the collectives or the agent report what follows.
      log::debug("elastic watch: {}", e.what());
    }
  }
}

// Under mutex_.
void ElasticRound::check_end() {
  const std::string kind_key = round_end_kind_key(job_, round_);
  if (!store_->check({kind_key})) return;
  // end_kind is set before end_reason: wait for both.
  const std::string reason_key = round_end_reason_key(job_, round_);
  if (!store_->check({reason_key})) return;
  const auto kind =
      static_cast<RoundEndKind>(to_int(store_string(store_->get(kind_key)), "end_kind"));
  if (kind == RoundEndKind::kStopped) return;  // the workers' stop signal handles it
  const std::string reason = store_string(store_->get(reason_key));
  if (kind == RoundEndKind::kFailure) failure_ = reason;
  ended_ = true;
  log::info("round {} ended ({}): regrouping in place", round_, reason);
}

std::optional<std::string> ElasticRound::abandon_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void ElasticRound::request_regroup(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  store_->set(agent_key(job_, agent_, fmt::format("regroup/{}", round_)),
              store_bytes(fmt::format("local rank {}: {}", local_rank_, reason)));
}

ElasticPlace ElasticRound::wait_next_place(milliseconds timeout) {
  return wait_place_after(
      *store_, &mutex_, job_, agent_, round_, timeout,
      standby_ ? std::string("in standby, but") : fmt::format("round {} ended but", round_));
}

std::map<std::string, std::string> ElasticRound::environment_for(const ElasticPlace& p) const {
  return place_environment(p, local_rank_);
}

}  // namespace chexscale::distributed
