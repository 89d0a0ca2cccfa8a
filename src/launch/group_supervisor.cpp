// The supervision loop of a local worker group (see group_supervisor.h).
#include "launch/group_supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "launch/line_prefixer.h"
#include "train/stop_contract.h"

namespace chexscale::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The stop signals reach the supervision loop through a self-pipe (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};
struct sigaction g_old_actions[3];
constexpr int kStopSignals[3] = {SIGTERM, SIGINT, SIGUSR1};

void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; keep supervising
    done += static_cast<size_t>(n);
  }
}

// Reads what is available on `fd` into the prefixer; closes it at end of stream.
void relay(int& fd, LinePrefixer& prefixer, int out_fd) {
  char buffer[65536];
  std::string lines;
  while (fd >= 0) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      prefixer.feed(buffer, static_cast<size_t>(n), lines);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    prefixer.flush(lines);
    ::close(fd);
    fd = -1;
  }
  write_all(out_fd, lines);
}

}  // namespace

StopSignals::StopSignals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(fmt::format("pipe(): {}", std::strerror(errno)));
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  for (int i = 0; i < 3; ++i)
    ::sigaction(kStopSignals[i], &action, &g_old_actions[i]);
  ::signal(SIGPIPE, SIG_IGN);  // a closed terminal must not kill the supervisor
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i)
    ::sigaction(kStopSignals[i], &g_old_actions[i], nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
}

int StopSignals::fd() const {
  return g_signal_pipe[0];
}

int StopSignals::take() const {
  unsigned char sig = 0;
  return ::read(g_signal_pipe[0], &sig, 1) == 1 ? sig : 0;
}

bool GroupOutcome::all_preempted() const {
  for (int s : statuses)
    if (s != train::kExitPreempted) return false;
  return !statuses.empty();
}

std::string GroupOutcome::describe_stop(const std::vector<WorkerProcess>& workers) const {
  std::map<int, std::vector<int>> ranks_by_status;
  for (size_t i = 0; i < workers.size() && i < statuses.size(); ++i)
    ranks_by_status[statuses[i]].push_back(workers[i].rank());
  std::vector<std::string> parts;
  for (const auto& [status, ranks] : ranks_by_status) {
    const std::string who =
        fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
    if (status == train::kExitPreempted) {
      parts.push_back(fmt::format("{} exited {} (stopped at a checkpoint)", who, status));
    } else {
      parts.push_back(fmt::format("{} ended with {}", who, describe_exit(status)));
    }
  }
  if (killed) parts.emplace_back("SIGKILL sent when the grace ran out");
  return fmt::format("{}", fmt::join(parts, "; "));
}

namespace {

// One started group while supervise() runs: its output relays, what has happened so far and the
// SIGKILL deadline, once the group is asked to end.
class RunningGroup {
 public:
  RunningGroup(std::vector<WorkerProcess>& workers, const SuperviseOptions& options)
      : workers_(workers), options_(options) {
    for (const auto& w : workers_) {
      out_prefix_.emplace_back(fmt::format("[rank {}] ", w.rank()));
      err_prefix_.emplace_back(fmt::format("[rank {}] ", w.rank()));
    }
    outcome_.statuses.assign(workers_.size(), -1);
  }

  // Up to 100 ms until a signal or some output arrives.
  void wait(const StopSignals& signals) const {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (auto& w : workers_) {
      if (w.stdout_fd() >= 0) fds.push_back({w.stdout_fd(), POLLIN, 0});
      if (w.stderr_fd() >= 0) fds.push_back({w.stderr_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
  }

  void forward_stop_signals(const StopSignals& signals) {
    for (int sig = signals.take(); sig != 0; sig = signals.take()) {
      if (outcome_.signal == 0) {
        outcome_.signal = sig;
        log::warn(
            "chexscale launch: got {}; forwarding it to the workers (SIGKILL in {:g} s unless "
            "they have exited)",
            train::stop_signal_name(sig), options_.stop_grace.count());
        kill_after(options_.stop_grace);
      } else {
        log::warn("chexscale launch: got {} again; forwarding it (the workers end at once)",
                  train::stop_signal_name(sig));
      }
      signal_all(sig);
    }
  }

  // Acts on the hook's first request other than kNone.
  void ask_hook() {
    const GroupRequest request = options_.hook ? options_.hook() : GroupRequest::kNone;
    if (outcome_.request != GroupRequest::kNone || request == GroupRequest::kNone) return;
    outcome_.request = request;
    if (request == GroupRequest::kStop) {
      signal_all(SIGTERM);
      kill_after(options_.stop_grace);
    } else if (request == GroupRequest::kKill) {
      signal_all(SIGKILL);
    }
  }

  // Relays each worker's output and records its exit; true once all have exited and their output
  // is drained.
  bool relay_and_reap() {
    bool all_done = true;
    for (size_t i = 0; i < workers_.size(); ++i) {
      WorkerProcess& w = workers_[i];
      relay(w.stdout_fd(), out_prefix_[i], options_.output_fd);
      relay(w.stderr_fd(), err_prefix_[i], options_.error_fd);
      const std::optional<int> status = w.poll_exit();
      if (status && outcome_.statuses[i] == -1) record_exit(i, *status);
      all_done = all_done && status.has_value() && w.stdout_fd() < 0 && w.stderr_fd() < 0;
    }
    return all_done;
  }

  void kill_when_due() {
    if (kill_at_ && Clock::now() >= *kill_at_ && !outcome_.killed) {
      outcome_.killed = true;
      signal_all(SIGKILL);
    }
  }

  GroupOutcome outcome() const { return outcome_; }

 private:
  void kill_after(std::chrono::duration<double> wait) {
    const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(wait);
    if (!kill_at_ || at < *kill_at_) kill_at_ = at;
  }

  void signal_all(int sig) {
    for (auto& w : workers_)
      w.signal(sig);
  }

  void record_exit(size_t i, int status) {
    outcome_.statuses[i] = status;
    const WorkerProcess& w = workers_[i];
    if (status == train::kExitPreempted) {
      // The others stop at the same agreed step; they are killed if they do not.
      outcome_.preempted = true;
      kill_after(options_.stop_grace);
    } else if (status != 0 && outcome_.failed_rank < 0) {
      outcome_.failed_rank = w.rank();
      outcome_.failed_status = status;
      if (outcome_.signal == 0 && outcome_.request == GroupRequest::kNone) {
        log::error("chexscale launch: rank {} (pid {}) ended with {}; stopping the other workers",
                   w.rank(), w.pid(), describe_exit(status));
        signal_all(SIGTERM);
        kill_after(options_.grace_period);
      }
    }
  }

  std::vector<WorkerProcess>& workers_;
  const SuperviseOptions& options_;
  std::vector<LinePrefixer> out_prefix_, err_prefix_;
  GroupOutcome outcome_;
  std::optional<Clock::time_point> kill_at_;  // set once the group is asked to end
};

}  // namespace

GroupOutcome supervise(std::vector<WorkerProcess>& workers, const SuperviseOptions& options,
                       const StopSignals& signals) {
  RunningGroup group(workers, options);
  while (true) {
    group.wait(signals);
    group.forward_stop_signals(signals);
    group.ask_hook();
    if (group.relay_and_reap()) break;
    group.kill_when_due();
  }
  return group.outcome();
}

}  // namespace chexscale::launch
