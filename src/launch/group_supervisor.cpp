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

GroupOutcome supervise(std::vector<WorkerProcess>& workers, const SuperviseOptions& options,
                       const StopSignals& signals) {
  std::vector<LinePrefixer> out_prefix, err_prefix;
  for (const auto& w : workers) {
    out_prefix.emplace_back(fmt::format("[rank {}] ", w.rank()));
    err_prefix.emplace_back(fmt::format("[rank {}] ", w.rank()));
  }
  GroupOutcome outcome;
  outcome.statuses.assign(workers.size(), -1);
  std::optional<Clock::time_point> kill_at;  // set once the group is asked to end
  const auto kill_after = [&](std::chrono::duration<double> wait) {
    const auto at = Clock::now() + std::chrono::duration_cast<Clock::duration>(wait);
    if (!kill_at || at < *kill_at) kill_at = at;
  };
  const auto signal_all = [&](int sig) {
    for (auto& w : workers)
      w.signal(sig);
  };
  while (true) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (auto& w : workers) {
      if (w.stdout_fd() >= 0) fds.push_back({w.stdout_fd(), POLLIN, 0});
      if (w.stderr_fd() >= 0) fds.push_back({w.stderr_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    for (int sig = signals.take(); sig != 0; sig = signals.take()) {
      if (outcome.signal == 0) {
        outcome.signal = sig;
        log::warn(
            "chexscale launch: got {}; forwarding it to the workers (SIGKILL in {:g} s unless "
            "they have exited)",
            train::stop_signal_name(sig), options.stop_grace.count());
        kill_after(options.stop_grace);
      } else {
        log::warn("chexscale launch: got {} again; forwarding it (the workers end at once)",
                  train::stop_signal_name(sig));
      }
      signal_all(sig);
    }
    const GroupRequest request = options.hook ? options.hook() : GroupRequest::kNone;
    if (outcome.request == GroupRequest::kNone && request != GroupRequest::kNone) {
      outcome.request = request;
      if (outcome.request == GroupRequest::kStop) {
        signal_all(SIGTERM);
        kill_after(options.stop_grace);
      } else if (outcome.request == GroupRequest::kKill) {
        signal_all(SIGKILL);
      }
    }
    bool all_done = true;
    for (size_t i = 0; i < workers.size(); ++i) {
      WorkerProcess& w = workers[i];
      relay(w.stdout_fd(), out_prefix[i], options.output_fd);
      relay(w.stderr_fd(), err_prefix[i], options.error_fd);
      const std::optional<int> status = w.poll_exit();
      if (status && outcome.statuses[i] == -1) {
        outcome.statuses[i] = *status;
        if (*status == train::kExitPreempted) {
          // The others stop at the same agreed step; they are killed if they do not.
          outcome.preempted = true;
          kill_after(options.stop_grace);
        } else if (*status != 0 && outcome.failed_rank < 0) {
          outcome.failed_rank = w.rank();
          outcome.failed_status = *status;
          if (outcome.signal == 0 && outcome.request == GroupRequest::kNone) {
            log::error(
                "chexscale launch: rank {} (pid {}) ended with {}; stopping the other workers",
                w.rank(), w.pid(), describe_exit(*status));
            signal_all(SIGTERM);
            kill_after(options.grace_period);
          }
        }
      }
      all_done = all_done && status.has_value() && w.stdout_fd() < 0 && w.stderr_fd() < 0;
    }
    if (all_done) break;
    if (kill_at && Clock::now() >= *kill_at && !outcome.killed) {
      outcome.killed = true;
      signal_all(SIGKILL);
    }
  }
  return outcome;
}

}  // namespace chexscale::launch
