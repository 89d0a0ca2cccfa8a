// The elastic rendezvous protocol on a c10d store (see elastic_rendezvous.h). Keys, under
// "chexscale/elastic/<job id>/": round (the open round), r<R>/joined (places taken),
// r<R>/node/<i> ("<nproc> <name>"), r<R>/close (who closes), r<R>/attempt (the round's number
// on the server), r<R>/size (nodes admitted), r<R>/hb/<i>, r<R>/back/<i> (node i of round R-1
// joined round R), r<R>/done/<i>, r<R>/lost/<i> (found silent), r<R>/end (who ends), r<R>/end_kind,
// r<R>/end_reason, failures, finished; and "chexscale/elastic/attempts", the rounds of every job so
// far.
#include "launch/elastic_rendezvous.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "distributed/store_io.h"

namespace chexscale::launch {
namespace {

using distributed::store_bytes;
using distributed::store_string;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Counts the rounds of every job the server has seen.
constexpr const char* kAttemptsKey = "chexscale/elastic/attempts";

double seconds(milliseconds ms) {
  return static_cast<double>(ms.count()) / 1000.0;
}

}  // namespace

ElasticRendezvous::ElasticRendezvous(c10::intrusive_ptr<c10d::Store> store, std::string job_id,
                                     std::string node_name, int nproc, RoundRules rules)
    : store_(std::move(store)),
      job_id_(std::move(job_id)),
      node_name_(std::move(node_name)),
      nproc_(nproc),
      rules_(rules) {
  membership_.round = -1;
}

std::string ElasticRendezvous::key(const std::string& name) const {
  return distributed::elastic_key(job_id_, name);
}

int ElasticRendezvous::counter(const std::string& name, int64_t add) {
  return static_cast<int>(store_->add(key(name), add));
}

std::optional<int> ElasticRendezvous::round_size(int r) {
  const std::string size = key(fmt::format("r{}/size", r));
  if (r < 0 || !store_->check({size})) return std::nullopt;
  return std::stoi(store_string(store_->get(size)));
}

std::optional<Membership> ElasticRendezvous::join(Clock::time_point deadline) {
  const Membership previous = membership_;
  int waited_in = -1;  // the running round this node counts as waiting in
  while (true) {
    if (finished()) {
      if (took_part_ || away_at_the_end()) return std::nullopt;
      throw DistError(fmt::format(
          "job '{}' on this rendezvous server has finished already (node {} was not part of it): "
          "start a new job with a new --rdzv-id, or restart the rendezvous server",
          job_id_, node_name_));
    }
    const int r = counter("round");
    if (wait_in_running_round(r, waited_in, deadline)) {
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    // A round opened for a node that waited: a new timeout to close it, as torch gives a node
    // leaving its redundancy list.
    if (waited_in >= 0) deadline = std::max(deadline, Clock::now() + rules_.join_timeout);
    const std::string round = fmt::format("r{}/", r);
    const int place = counter(round + "joined", 1) - 1;
    took_part_ = true;
    store_->set(key(fmt::format("{}node/{}", round, place)),
                store_bytes(fmt::format("{} {}", nproc_, node_name_)));
    if (previous.round == r - 1)
      store_->set(key(fmt::format("{}back/{}", round, previous.node_rank)), store_bytes("1"));
    if (!wait_until_closed(r, deadline)) return std::nullopt;
    if (auto m = admitted(r, place)) {
      membership_ = *m;
      seen_.clear();
      last_beat_ = {};
      heartbeat();
      return m;
    }
    waited_in = r;  // closed just before this node's place: wait for the next
  }
}

bool ElasticRendezvous::wait_in_running_round(int r, int& waited_in, TimePoint deadline) {
  const std::optional<int> size = round_size(r);
  if (!size) return false;
  // Under way (or ending): count as waiting once, so that its nodes open the next round when it
  // has room; a full one is left alone and this node waits as a spare.
  const bool full = *size >= rules_.max_nodes;
  const std::string round = fmt::format("r{}/", r);
  if (waited_in != r && !store_->check({key(round + "end_reason")})) {
    counter(round + "joined", 1);
    took_part_ = true;
    waited_in = r;
    if (full) {
      log::info(
          "chexscale launch: round {} is under way with {} node(s), the most --nnodes {}:{} "
          "allows: node {} waits as a spare to be taken in when the next round opens (a node "
          "lost), for at most {:g} s (--rdzv-timeout)",
          r, *size, rules_.min_nodes, rules_.max_nodes, node_name_,
          seconds(std::chrono::duration_cast<milliseconds>(deadline - Clock::now())));
    } else {
      log::info(
          "chexscale launch: round {} is under way with {} of at most {} node(s): node {} "
          "waits for its nodes to open the next round",
          r, *size, rules_.max_nodes, node_name_);
    }
  }
  if (Clock::now() >= deadline) {
    throw DistError(
        full ? fmt::format("no round took node {} in within --rdzv-timeout: round {} kept all "
                           "{} places of --nnodes {}:{} the whole time (no node was lost); "
                           "start it again later, or allow more nodes",
                           node_name_, r, *size, rules_.min_nodes, rules_.max_nodes)
             : fmt::format("no round took node {} in within --rdzv-timeout: round {} ran on "
                           "with {} of at most {} node(s) and its nodes did not open the "
                           "next round",
                           node_name_, r, *size, rules_.max_nodes));
  }
  return true;
}

bool ElasticRendezvous::wait_until_closed(int r, TimePoint deadline) {
  const std::string round = fmt::format("r{}/", r);
  // The previous round's nodes: each is back, finished or silent before the round closes.
  const int previous_nodes = round_size(r - 1).value_or(0);
  // Nodes that joined round r-1 after it closed: they wait for this one.
  const int previous_waiting =
      previous_nodes > 0 ? std::max(0, counter(fmt::format("r{}/joined", r - 1)) - previous_nodes)
                         : 0;
  std::map<int, Seen> silent;
  int last_joined = -1;
  auto quiet_since = Clock::now();
  while (!store_->check({key(round + "size")})) {
    const auto now = Clock::now();
    const int joined = counter(round + "joined");
    if (joined != last_joined) {
      last_joined = joined;
      quiet_since = now;
    }
    const bool everyone_back = previous_round_back(r, previous_nodes, silent, now);
    // Without the last call only once the nodes that waited for this round have joined it.
    const bool quiet = now - quiet_since >= rules_.last_call ||
                       (rules_.close_when_back && previous_nodes > 0 &&
                        joined >= nodes_back(r, previous_nodes) + previous_waiting);
    if (joined >= rules_.max_nodes || (joined >= rules_.min_nodes && quiet && everyone_back)) {
      if (counter(round + "close", 1) == 1) {
        const int64_t attempt = store_->add(kAttemptsKey, 1) - 1;
        store_->set(key(round + "attempt"), store_bytes(std::to_string(attempt)));
        store_->set(key(round + "size"),
                    store_bytes(std::to_string(std::min(joined, rules_.max_nodes))));
      }
    }
    if (finished()) return false;
    if (now >= deadline) {
      throw DistError(fmt::format(
          "rendezvous round {} did not close within --rdzv-timeout: {} node(s) joined, at least "
          "{} needed",
          r, joined, rules_.min_nodes));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

int ElasticRendezvous::nodes_back(int r, int previous_nodes) {
  int back = 0;
  for (int i = 0; i < previous_nodes; ++i)
    back += store_->check({key(fmt::format("r{}/back/{}", r, i))}) ? 1 : 0;
  return back;
}

bool ElasticRendezvous::previous_round_back(int r, int previous_nodes, std::map<int, Seen>& silent,
                                            TimePoint now) {
  const std::string round = fmt::format("r{}/", r);
  const std::string before = fmt::format("r{}/", r - 1);
  for (int i = 0; i < previous_nodes; ++i) {
    if (store_->check({key(fmt::format("{}back/{}", round, i))}) ||
        store_->check({key(fmt::format("{}done/{}", before, i))}) ||
        store_->check({key(fmt::format("{}lost/{}", before, i))})) {
      continue;
    }
    const int64_t beat = counter(fmt::format("{}hb/{}", before, i));
    Seen& s = silent[i];
    if (beat != s.value) s = {beat, now};
    if (now - s.changed < rules_.heartbeat_timeout) return false;
  }
  return true;
}

std::vector<std::string> ElasticRendezvous::round_nodes(int r) {
  std::vector<std::string> names;
  const std::optional<int> size = round_size(r);
  for (int i = 0; i < size.value_or(0); ++i) {
    const std::string entry = store_string(store_->get(key(fmt::format("r{}/node/{}", r, i))));
    names.push_back(entry.substr(entry.find(' ') + 1));
  }
  return names;
}

bool ElasticRendezvous::away_at_the_end() {
  int rounds = 0;  // closed ones
  while (round_size(rounds))
    ++rounds;
  const auto in_round = [&](int r) {
    const std::vector<std::string> names = round_nodes(r);
    return std::find(names.begin(), names.end(), node_name_) != names.end();
  };
  if (rounds == 0 || in_round(rounds - 1)) return false;
  for (int r = 0; r < rounds - 1; ++r) {
    if (!in_round(r)) continue;
    log::info(
        "chexscale launch: job '{}' finished in round {} while node {} was away (it took part "
        "in round {}): nothing left to do",
        job_id_, rounds - 1, node_name_, r);
    return true;
  }
  return false;
}

std::optional<Membership> ElasticRendezvous::admitted(int r, int place) {
  const std::string round = fmt::format("r{}/", r);
  const int size = round_size(r).value();
  if (place >= size) return std::nullopt;
  Membership m;
  m.round = r;
  m.attempt = std::stoi(store_string(store_->get(key(round + "attempt"))));
  m.node_rank = place;
  for (int i = 0; i < size; ++i) {
    const std::string entry = store_string(store_->get(key(fmt::format("{}node/{}", round, i))));
    const size_t space = entry.find(' ');
    const int nproc = std::stoi(entry.substr(0, space));
    if (i < place) m.rank_offset += nproc;
    m.world_size += nproc;
    m.node_names.push_back(entry.substr(space + 1));
  }
  return m;
}

void ElasticRendezvous::heartbeat() {
  const auto now = Clock::now();
  if (now - last_beat_ < rules_.heartbeat_timeout / 10) return;
  last_beat_ = now;
  counter(fmt::format("r{}/hb/{}", membership_.round, membership_.node_rank), 1);
}

std::vector<int> ElasticRendezvous::stale_nodes() {
  std::vector<int> stale;
  const auto now = Clock::now();
  const std::string round = fmt::format("r{}/", membership_.round);
  for (int i = 0; i < membership_.nodes(); ++i) {
    if (i == membership_.node_rank || store_->check({key(fmt::format("{}done/{}", round, i))})) {
      continue;
    }
    const int64_t beat = counter(fmt::format("{}hb/{}", round, i));
    Seen& s = seen_[i];
    if (beat != s.value) s = {beat, now};
    if (now - s.changed >= rules_.heartbeat_timeout) {
      stale.push_back(i);
      // The next round does not wait for it.
      store_->set(key(fmt::format("{}lost/{}", round, i)), store_bytes("1"));
    }
  }
  return stale;
}

int ElasticRendezvous::waiting_nodes() {
  return counter(fmt::format("r{}/joined", membership_.round)) - membership_.nodes();
}

RoundEnd ElasticRendezvous::end_round(const RoundEnd& end) {
  const std::string round = fmt::format("r{}/", membership_.round);
  if (counter(round + "end", 1) == 1) {
    store_->set(key(round + "end_kind"), store_bytes(std::to_string(static_cast<int>(end.kind))));
    store_->set(key(round + "end_reason"), store_bytes(end.reason));
    if (end.kind == RoundEnd::Kind::kFailure) counter("failures", 1);
    counter("round", 1);
  }
  store_->wait({key(round + "end_reason")});
  return *round_end();
}

std::optional<RoundEnd> ElasticRendezvous::round_end() {
  const std::string round = fmt::format("r{}/", membership_.round);
  if (!store_->check({key(round + "end_reason")})) return std::nullopt;
  RoundEnd end;
  end.reason = store_string(store_->get(key(round + "end_reason")));
  end.kind =
      static_cast<RoundEnd::Kind>(std::stoi(store_string(store_->get(key(round + "end_kind")))));
  return end;
}

void ElasticRendezvous::finish() {
  store_->set(key(fmt::format("r{}/done/{}", membership_.round, membership_.node_rank)),
              store_bytes("1"));
  store_->set(key("finished"), store_bytes("1"));
}

bool ElasticRendezvous::finished() {
  return store_->check({key("finished")});
}

int ElasticRendezvous::failed_rounds() {
  return counter("failures");
}

std::optional<std::string> ElasticRendezvous::regroup_request(const std::string& agent) {
  const std::string request =
      distributed::agent_key(job_id_, agent, fmt::format("regroup/{}", membership_.round));
  if (!store_->check({request})) return std::nullopt;
  return store_string(store_->get(request));
}

bool ElasticRendezvous::in_standby(const std::string& agent, int pid) {
  return store_->check({distributed::agent_key(job_id_, agent, fmt::format("standby/{}", pid))});
}

void ElasticRendezvous::post_place(const std::string& agent, const std::string& place) {
  const int r = membership_.round;
  store_->set(distributed::agent_key(job_id_, agent, fmt::format("place/{}", r)),
              store_bytes(place));
  store_->set(distributed::agent_key(job_id_, agent, "latest"), store_bytes(std::to_string(r)));
}

}  // namespace chexscale::launch
