// Runs N real worker processes as one single-node job (torchrun's environment, a free port) for
// the multi-process tests; each rank's stdout and stderr go to a log file the test can read.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/rendezvous.h"

namespace chexscale::test_util {

struct WorkerExit {
  int status = -1;     // exit code, 128 + signal when killed, -1 when still running at timeout
  double seconds = 0;  // from start until it exited
  std::string output;  // stdout and stderr
};

class WorkerGroup {
 public:
  WorkerGroup(const std::string& program, const std::vector<std::string>& args, int world,
              const std::string& log_dir, const std::map<std::string, std::string>& env = {})
      : start_(std::chrono::steady_clock::now()) {
    const int port = distributed::pick_free_port();
    for (int rank = 0; rank < world; ++rank) {
      logs_.push_back(log_dir + "/rank" + std::to_string(rank) + ".log");
      std::map<std::string, std::string> vars = env;
      vars["MASTER_ADDR"] = "127.0.0.1";
      vars["MASTER_PORT"] = std::to_string(port);
      vars["WORLD_SIZE"] = std::to_string(world);
      vars["RANK"] = std::to_string(rank);
      vars["LOCAL_RANK"] = std::to_string(rank);
      vars["LOCAL_WORLD_SIZE"] = std::to_string(world);
      pids_.push_back(spawn(program, args, vars, logs_.back()));
    }
  }
  ~WorkerGroup() {
    for (pid_t pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  }

  pid_t pid(int rank) const { return pids_[rank]; }

  // Waits for every rank up to `timeout` from the start; stragglers are killed (status -1).
  std::vector<WorkerExit> wait_all(std::chrono::seconds timeout) {
    std::vector<WorkerExit> exits(pids_.size());
    const auto deadline = start_ + timeout;
    size_t left = pids_.size();
    while (left > 0 && std::chrono::steady_clock::now() < deadline) {
      for (size_t r = 0; r < pids_.size(); ++r) {
        int status = 0;
        if (pids_[r] > 0 && ::waitpid(pids_[r], &status, WNOHANG) == pids_[r]) {
          exits[r].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          exits[r].seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
          pids_[r] = -1;
          --left;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] > 0) {
        ::kill(pids_[r], SIGKILL);
        ::waitpid(pids_[r], nullptr, 0);
        pids_[r] = -1;
      }
      std::ifstream in(logs_[r]);
      std::stringstream text;
      text << in.rdbuf();
      exits[r].output = text.str();
    }
    return exits;
  }

 private:
  static pid_t spawn(const std::string& program, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& vars, const std::string& log) {
    std::vector<std::string> argv_storage{program};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    // Everything is prepared before fork(): the child only calls async-signal-safe functions.
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      if (vars.count(entry.substr(0, entry.find('='))) == 0) env_storage.push_back(entry);
    }
    for (const auto& [k, v] : vars)
      env_storage.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_storage)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(program.c_str(), argv.data(), envp.data());
      ::_exit(127);
    }
    ::close(fd);
    return pid;
  }

  std::chrono::steady_clock::time_point start_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

}  // namespace chexscale::test_util
