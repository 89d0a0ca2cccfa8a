// Runs real child processes for the Kubernetes tests: each with an exact environment, its own
// process group (so a launcher and its workers die together), output captured in a file, and a
// deadline after which the whole group is killed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chexscale::test_util {

struct ProcessSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=VALUE", the child's whole environment
  std::string output_file;       // stdout and stderr go here
};

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed
  bool timed_out = false;
  std::string output;
};

inline std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts every process, waits for all of them until `timeout`, then kills what is left.
inline std::vector<ProcessResult> run_processes(std::vector<ProcessSpec> specs,
                                                std::chrono::seconds timeout) {
  std::vector<pid_t> pids;
  for (auto& spec : specs) {
    auto argv = c_strings(spec.argv);
    auto envp = c_strings(spec.env);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      const int fd = ::open(spec.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);
    pids.push_back(pid);
  }
  std::vector<ProcessResult> results(specs.size());
  std::vector<bool> done(specs.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t remaining = specs.size();
  while (remaining > 0) {
    const bool late = std::chrono::steady_clock::now() > deadline;
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      if (late) {
        ::kill(-pids[i], SIGKILL);
        results[i].timed_out = true;
      }
      int status = 0;
      if (::waitpid(pids[i], &status, late ? 0 : WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        results[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        ::kill(-pids[i], SIGKILL);  // any worker left behind by a failed launcher
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    std::ifstream in(specs[i].output_file);
    std::stringstream ss;
    ss << in.rdbuf();
    results[i].output = ss.str();
  }
  return results;
}

// The current process environment plus `extra` ("NAME=VALUE", overriding).
inline std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool overridden = false;
    for (const auto& x : extra) {
      overridden =
          overridden || entry.substr(0, entry.find('=') + 1) == x.substr(0, x.find('=') + 1);
    }
    if (!overridden) env.push_back(entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// Runs one process to completion (see run_processes).
inline ProcessResult run_process(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env,
                                 const std::string& output_file,
                                 std::chrono::seconds timeout = std::chrono::seconds(60)) {
  return run_processes({ProcessSpec{argv, env, output_file}}, timeout).front();
}

}  // namespace chexscale::test_util
