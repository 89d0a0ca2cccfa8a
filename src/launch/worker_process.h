// One supervised worker process: started in its own process group (so the launcher alone gets
// the terminal's signals and forwards them), killed if the launcher dies, with stdout and stderr
// on pipes that the launcher reads and prefixes with the worker's rank.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chexscale::launch {

class WorkerProcess {
 public:
  // Starts `program args...` with the launcher's environment plus `env` (which wins). The
  // child joins each cgroup whose cgroup.procs file `cgroups` lists before it execs (it exits
  // with 127 and a message if it cannot: a worker never runs outside its group).
  WorkerProcess(int rank, const std::string& program, const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env,
                const std::vector<std::string>& cgroups = {});
  ~WorkerProcess();
  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  WorkerProcess& operator=(WorkerProcess&&) = delete;

  int rank() const { return rank_; }
  pid_t pid() const { return pid_; }
  // Read ends of the worker's stdout and stderr (non-blocking; -1 once closed).
  int& stdout_fd() { return out_fd_; }
  int& stderr_fd() { return err_fd_; }

  // Sends `sig` to the worker's process group (it and anything it started).
  void signal(int sig) const;
  // The exit status once the worker has exited (exit code, or 128 + signal), without blocking.
  std::optional<int> poll_exit();
  bool running() const { return !status_.has_value(); }

 private:
  int rank_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::optional<int> status_;
};

// Describes an exit status for messages: "exit status 3" or "signal 9 (Killed)".
std::string describe_exit(int status);

}  // namespace chexscale::launch
