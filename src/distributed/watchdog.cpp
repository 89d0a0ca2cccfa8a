// The collective watchdog: heartbeats in the store and the diagnosis of failed collectives.
#include "distributed/watchdog.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <exception>
#include <future>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "distributed/store_io.h"

namespace chexscale::distributed {
namespace {

using std::chrono::milliseconds;

// Heartbeats come this often, and a rank whose heartbeat has not moved for kStaleBeats of them
// is lost; both scale down with short collective timeouts (tests) so diagnosis fits in them.
std::chrono::milliseconds heartbeat_interval(milliseconds timeout) {
  return std::clamp(timeout / 10, milliseconds(100), milliseconds(1000));
}
constexpr int kStaleBeats = 3;
// How often a wait looks at the abandon check: short enough that a lost node costs no more than
// this beyond the agents' verdict.
constexpr milliseconds kAbandonSlice{50};

const char* const kFailureKey = "watchdog/failure";
std::string beat_key(int rank) {
  return fmt::format("watchdog/beat/{}", rank);
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

}  // namespace

CollectiveWatchdog::CollectiveWatchdog(c10::intrusive_ptr<c10d::Store> store, int rank,
                                       int world_size, milliseconds timeout,
                                       std::string store_address)
    : store_(std::move(store)),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout),
      interval_(heartbeat_interval(timeout)),
      store_address_(std::move(store_address)) {
  publish("0 0");
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  heartbeat_.join();
  // Unwinding means this rank is leaving because of an error: say so, so that the others
  // report "rank r failed" instead of guessing from a stopped heartbeat.
  const bool unwinding = std::uncaught_exceptions() > 0;
  if (!failed_) publish(fmt::format("{} {}", unwinding ? "failed" : "exited", issued_.load()));
}

void CollectiveWatchdog::publish(const std::string& state) {
  try {
    store_->set(beat_key(rank_), store_bytes(state));
  } catch (const std::exception&) {
    // The store is gone (rank 0 ended); the next collective reports it.
  }
}

void CollectiveWatchdog::heartbeat_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    ++beats_;
    const std::string state = fmt::format("{} {}", beats_, issued_.load());
    lock.unlock();
    publish(state);
    lock.lock();
  }
}

uint64_t CollectiveWatchdog::begin() {
  return ++issued_;
}

CollectiveWatchdog::Beat CollectiveWatchdog::read_beat(int rank) {
  const std::string key = beat_key(rank);
  if (!store_->check({key})) return {};
  const auto bytes = store_->get(key);
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string first;
  Beat beat;
  in >> first >> beat.seq;
  beat.beats = first == "exited" ? kExited : first == "failed" ? kFailed : std::stoll(first);
  return beat;
}

std::string CollectiveWatchdog::read_posted_failure() {
  if (!store_->check({kFailureKey})) return "";
  const auto bytes = store_->get(kFailureKey);
  return std::string(bytes.begin(), bytes.end());
}

namespace {

// What the second look at the other ranks' heartbeats found.
struct RankFindings {
  std::vector<int> lost;    // heartbeat stopped
  std::vector<int> failed;  // posted a failure
  std::vector<int> exited;  // left the job
  std::vector<int> behind;  // alive, not at this collective
};

// "lost rank 2: ...; ranks 3, 4 failed ..."; "" when nothing was found.
std::string describe(const RankFindings& f) {
  std::string finding;
  if (!f.lost.empty()) {
    finding = fmt::format(
        "lost rank{} {}: heartbeat stopped (the process died or its host is unreachable)",
        f.lost.size() > 1 ? "s" : "", fmt::join(f.lost, ", "));
  }
  if (!f.failed.empty()) {
    finding += fmt::format("{}rank{} {} failed (see its own error)", finding.empty() ? "" : "; ",
                           f.failed.size() > 1 ? "s" : "", fmt::join(f.failed, ", "));
  }
  if (!f.exited.empty()) {
    finding += fmt::format("{}rank{} {} already left the job", finding.empty() ? "" : "; ",
                           f.exited.size() > 1 ? "s" : "", fmt::join(f.exited, ", "));
  }
  if (!f.behind.empty()) {
    finding += fmt::format("{}ranks that did not arrive: {}", finding.empty() ? "" : "; ",
                           fmt::join(f.behind, ", "));
  }
  return finding;
}

}  // namespace

std::string CollectiveWatchdog::diagnose(uint64_t seq, const std::string& what,
                                         const std::string& cause, bool timed_out) {
  const std::string head =
      fmt::format("{} (collective #{}) {} on rank {}", what, seq, cause, rank_);
  try {
    // Two looks at every heartbeat, kStaleBeats intervals apart; another rank's finding (posted
    // in the store) wins, so every survivor names the same root cause.
    std::vector<Beat> before(world_size_), after(world_size_);
    for (int r = 0; r < world_size_; ++r)
      before[r] = read_beat(r);
    const auto until = std::chrono::steady_clock::now() + kStaleBeats * interval_;
    while (std::chrono::steady_clock::now() < until) {
      if (std::string posted = read_posted_failure(); !posted.empty()) return head + "; " + posted;
      std::this_thread::sleep_for(milliseconds(50));
    }
    for (int r = 0; r < world_size_; ++r)
      after[r] = read_beat(r);
    RankFindings found;
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      if (after[r].beats == kFailed) {
        found.failed.push_back(r);
      } else if (after[r].beats == kExited) {
        found.exited.push_back(r);
      } else if (after[r].beats == before[r].beats) {
        found.lost.push_back(r);
      } else if (timed_out && after[r].seq < seq) {
        found.behind.push_back(r);
      }
    }
    const std::string finding = describe(found);
    if (finding.empty()) {
      return head + "; every rank's heartbeat is alive and has arrived (a network fault?)";
    }
    if (!found.lost.empty() || !found.failed.empty()) {
      store_->compareSet(kFailureKey, {},
                         store_bytes(fmt::format("{} (found by rank {})", finding, rank_)));
    }
    return head + "; " + finding;
  } catch (const std::exception& e) {
    return head + fmt::format(
                      "; the rendezvous store at {} served by rank 0 is unreachable ({}): lost "
                      "rank 0",
                      store_address_, first_line(e.what()));
  }
}

void CollectiveWatchdog::set_abandon(std::function<std::optional<std::string>()> abandon) {
  abandon_ = std::move(abandon);
}

void CollectiveWatchdog::throw_abandoned(uint64_t seq, const std::string& what,
                                         const std::string& why) {
  failed_ = true;
  throw DistError(fmt::format("{} (collective #{}) abandoned on rank {}: the round ended: {}", what,
                              seq, rank_, why));
}

void CollectiveWatchdog::wait_abandonable(c10d::Work& work, uint64_t seq, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::string how;
  while (how.empty()) {
    try {
      work.wait(kAbandonSlice);
      return;
    } catch (const std::exception&) {
      if (work.isCompleted()) {
        // It completed: in error, or just after the slice ran out (a success).
        try {
          work.wait();
          return;
        } catch (const std::exception& e) {
          how = "failed (" + first_line(e.what()) + ")";
        }
      } else if (std::optional<std::string> why = abandon_()) {
        throw_abandoned(seq, what, *why);
      } else if (std::chrono::steady_clock::now() >= deadline) {
        how = fmt::format("did not complete within {} s", timeout_.count() / 1000.0);
      }
    }
  }
  failed_ = true;
  throw DistError(fmt::format("{} (collective #{}) {} on rank {}", what, seq, how, rank_));
}

void CollectiveWatchdog::wait_point_to_point(const c10::intrusive_ptr<c10d::Work>& work,
                                             uint64_t seq, const std::string& what) {
  if (!abandon_) {
    wait(*work, seq, what);
    return;
  }
  auto result = std::make_shared<std::promise<void>>();
  std::future<void> done = result->get_future();
  std::thread([work, result, timeout = timeout_] {
    try {
      work->wait(timeout);
      result->set_value();
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  while (done.wait_for(kAbandonSlice) != std::future_status::ready) {
    if (std::optional<std::string> why = abandon_()) throw_abandoned(seq, what, *why);
  }
  try {
    done.get();
  } catch (const std::exception& e) {
    failed_ = true;
    throw DistError(fmt::format("{} (collective #{}) failed ({}) on rank {}", what, seq,
                                first_line(e.what()), rank_));
  }
}

void CollectiveWatchdog::wait(c10d::Work& work, uint64_t seq, const std::string& what) {
  if (abandon_) {
    wait_abandonable(work, seq, what);
    return;
  }
  std::string cause;
  try {
    work.wait(timeout_);
    return;
  } catch (const c10::Error& e) {
    cause = first_line(e.what_without_backtrace());
  } catch (const std::exception& e) {
    cause = first_line(e.what());
  }
  failed_ = true;
  // Our wait ran out, or the backend's own timeout fired first (Gloo: "Operation timed out!"),
  // which leaves the work completed with an error: both mean some rank has not arrived.
  const bool timed_out = !work.isCompleted() || cause.find("timed out") != std::string::npos ||
                         cause.find("Timed out") != std::string::npos ||
                         cause.find("timeout") != std::string::npos;
  const std::string how =
      timed_out ? fmt::format("did not complete within {} s", timeout_.count() / 1000.0)
                : "failed (" + cause + ")";
  log::debug("collective #{} {}: diagnosing", seq, how);
  throw DistError(diagnose(seq, what, how, timed_out));
}

}  // namespace chexscale::distributed
