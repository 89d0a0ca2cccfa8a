// The local launcher: topology from options and environment, the supervision loop (output relay,
// signal forwarding, teardown on failure) and whole-group restarts.
#include "launch/local_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "distributed/env.h"
#include "distributed/rendezvous.h"
#include "launch/line_prefixer.h"
#include "launch/worker_process.h"

namespace chexscale::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<int> env_int(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  try {
    return std::stoi(it->second);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{}='{}' is not an integer", name, it->second));
  }
}

// SIGINT/SIGTERM reach the supervision loop through a self-pipe (async-signal-safe).
int g_signal_pipe[2] = {-1, -1};
void on_signal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

class SignalForwarding {
 public:
  SignalForwarding() {
    if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw Error(fmt::format("pipe(): {}", std::strerror(errno)));
    }
    struct sigaction action {};
    action.sa_handler = on_signal;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    ::signal(SIGPIPE, SIG_IGN);  // a closed terminal must not kill the supervisor
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::close(g_signal_pipe[0]);
    ::close(g_signal_pipe[1]);
  }
  int fd() const { return g_signal_pipe[0]; }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; keep supervising
    done += static_cast<size_t>(n);
  }
}

// How one attempt of the group ended.
struct GroupOutcome {
  int exit_code = 0;
  int failed_rank = -1;
  int signal = 0;  // a forwarded SIGINT/SIGTERM: no restart
};

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

GroupOutcome supervise(std::vector<WorkerProcess>& workers, const LaunchOptions& options,
                       const SignalForwarding& signals) {
  std::vector<LinePrefixer> out_prefix, err_prefix;
  for (const auto& w : workers) {
    out_prefix.emplace_back(fmt::format("[rank {}] ", w.rank()));
    err_prefix.emplace_back(fmt::format("[rank {}] ", w.rank()));
  }
  GroupOutcome outcome;
  std::optional<Clock::time_point> kill_at;  // set once teardown starts
  auto tear_down = [&](int sig) {
    for (auto& w : workers)
      w.signal(sig);
    if (!kill_at) {
      kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(options.grace_period);
    }
  };
  while (true) {
    std::vector<pollfd> fds{{signals.fd(), POLLIN, 0}};
    for (auto& w : workers) {
      if (w.stdout_fd() >= 0) fds.push_back({w.stdout_fd(), POLLIN, 0});
      if (w.stderr_fd() >= 0) fds.push_back({w.stderr_fd(), POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 100);
    unsigned char sig = 0;
    if (::read(signals.fd(), &sig, 1) == 1 && outcome.signal == 0) {
      log::warn("chexscale launch: got signal {}; forwarding it to the workers", sig);
      outcome.signal = sig;
      tear_down(sig);
    }
    bool all_done = true;
    for (size_t i = 0; i < workers.size(); ++i) {
      WorkerProcess& w = workers[i];
      relay(w.stdout_fd(), out_prefix[i], options.output_fd);
      relay(w.stderr_fd(), err_prefix[i], options.error_fd);
      const std::optional<int> status = w.poll_exit();
      if (status && *status != 0 && outcome.failed_rank < 0 && outcome.signal == 0) {
        outcome.failed_rank = w.rank();
        outcome.exit_code = *status;
        log::error("chexscale launch: rank {} (pid {}) ended with {}; stopping the other workers",
                   w.rank(), w.pid(), describe_exit(*status));
        tear_down(SIGTERM);
      }
      all_done = all_done && status.has_value() && w.stdout_fd() < 0 && w.stderr_fd() < 0;
    }
    if (all_done) break;
    if (kill_at && Clock::now() >= *kill_at) {
      for (auto& w : workers)
        w.signal(SIGKILL);
    }
  }
  if (outcome.signal != 0) outcome.exit_code = 128 + outcome.signal;
  return outcome;
}

std::map<std::string, std::string> worker_env(const LaunchOptions& o, int local_rank, int port,
                                              int attempt) {
  std::map<std::string, std::string> env = o.extra_env;
  env["MASTER_ADDR"] = o.master_addr;
  env["MASTER_PORT"] = std::to_string(port);
  env["WORLD_SIZE"] = std::to_string(o.nnodes * o.nproc_per_node);
  env["RANK"] = std::to_string(o.node_rank * o.nproc_per_node + local_rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
  env["GROUP_RANK"] = std::to_string(o.node_rank);
  env["CHEXSCALE_RESTART_COUNT"] = std::to_string(attempt);
  if (o.worker_rdzv_timeout) {
    env["CHEXSCALE_RDZV_TIMEOUT"] = std::to_string(o.worker_rdzv_timeout->count());
  }
  return env;
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
  if (worker_rdzv_timeout && worker_rdzv_timeout->count() < 1) {
    throw UsageError(
        fmt::format("worker_rdzv_timeout {} s must be at least 1 s", worker_rdzv_timeout->count()));
  }
}

TorchrunFlags read_torchrun_flags(const std::map<std::string, std::string>& env) {
  auto text = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  TorchrunFlags f;
  if (auto nnodes = text("PET_NNODES")) {
    // torchrun's MIN:MAX; a fixed job says N or N:N.
    const size_t colon = nnodes->find(':');
    const std::string min = nnodes->substr(0, colon);
    if (colon != std::string::npos && nnodes->substr(colon + 1) != min) {
      throw UsageError(fmt::format(
          "PET_NNODES='{}' is an elastic range: chexscale launch runs a fixed number of nodes, so "
          "give N or N:N (an elastic PyTorchJob's minReplicas equal to its maxReplicas)",
          *nnodes));
    }
    f.nnodes = env_int({{"PET_NNODES", min}}, "PET_NNODES");
  }
  f.nproc_per_node = env_int(env, "PET_NPROC_PER_NODE");
  f.node_rank = env_int(env, "PET_NODE_RANK");
  f.max_restarts = env_int(env, "PET_MAX_RESTARTS");
  f.master_addr = text("PET_MASTER_ADDR");
  f.master_port = env_int(env, "PET_MASTER_PORT");
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
  if (o.nnodes < 1 || o.node_rank >= o.nnodes) {
    throw UsageError(
        fmt::format("node_rank {} must be in [0, `nnodes` {})", o.node_rank, o.nnodes));
  }
  if (o.master_addr.empty()) {
    auto addr = env.find("MASTER_ADDR");
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
    o.master_port = env_int(env, "MASTER_PORT").value_or(distributed::kDefaultMasterPort);
  }
  o.validate();  // the values taken from the environment too
  if (!o.program.empty() && ::access(o.program.c_str(), X_OK) != 0) {
    throw UsageError(
        fmt::format("program {}: not an executable ({})", o.program, std::strerror(errno)));
  }
  if (o.args.empty()) throw UsageError("nothing to launch: give the worker's command after --");
  return o;
}

LaunchResult run_local_group(const LaunchOptions& options) {
  const std::string program = options.program.empty() ? "/proc/self/exe" : options.program;
  SignalForwarding signals;
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
                           options.args, worker_env(options, local, port, attempt));
    }
    const GroupOutcome outcome = supervise(workers, options, signals);
    result.attempts = attempt + 1;
    result.exit_code = outcome.exit_code;
    result.failed_rank = outcome.failed_rank;
    if (outcome.signal != 0) {
      result.summary = fmt::format("stopped by signal {}", outcome.signal);
      return result;
    }
    if (outcome.exit_code == 0) {
      result.summary = fmt::format("all {} worker(s) finished", options.nproc_per_node);
      return result;
    }
    result.summary =
        fmt::format("rank {} failed with {} (attempt {} of {})", outcome.failed_rank,
                    describe_exit(outcome.exit_code), attempt + 1, options.max_restarts + 1);
    if (attempt < options.max_restarts) {
      log::warn("chexscale launch: {}; restarting the local group", result.summary);
    }
  }
  return result;
}

}  // namespace chexscale::launch
