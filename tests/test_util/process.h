// Starting processes from tests: a command (or a forked function) in its own process group with
// its stdout and stderr in one file, waited for with a deadline after which the whole group is
// killed, so that a hung child fails its test instead of hanging it. A child is also killed when
// the test program dies (Ctrl-C, a crash), since it no longer shares the terminal's signals.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_util/read_file.h"

namespace chexscale::test_util {

// How long a test waits for a process unless it says otherwise.
inline constexpr std::chrono::seconds kDefaultProcessTimeout{600};

struct ProcessResult {
  int exit_code = -1;      // the exit status; 128 + N when killed by signal N
  bool timed_out = false;  // still running at the deadline, then killed
  double seconds = 0;      // from the start until it exited or was killed
  std::string output;      // stdout and stderr together
};

// The current environment ("NAME=VALUE" entries) with `overrides` replacing or adding entries.
inline std::vector<std::string> environment_with(const std::vector<std::string>& overrides = {}) {
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool overridden = false;
    for (const auto& o : overrides)
      overridden = overridden || name_of(o) == name_of(entry);
    if (!overridden) env.push_back(entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

struct ProcessSpec {
  std::vector<std::string> argv;                      // argv[0] is the program's path
  std::vector<std::string> env = environment_with();  // the child's whole environment
  std::string output_file;  // receives stdout and stderr; empty: a temporary file
};

// One child process in its own process group. The destructor kills the group (a launcher's
// workers too) and reaps the child.
class Process {
 public:
  explicit Process(ProcessSpec spec) : output_file_(std::move(spec.output_file)) {
    // Everything is prepared before fork(): the child only calls async-signal-safe functions.
    std::vector<char*> argv = c_strings(spec.argv);
    std::vector<char*> envp = c_strings(spec.env);
    start([&] {
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    });
  }

  // Forks this test program; the child runs `body`, then exits with status 0.
  explicit Process(const std::function<void()>& body) {
    start([&] {
      body();
      ::_exit(0);
    });
  }

  ~Process() {
    ::kill(-pid_, SIGKILL);
    if (!status_) ::waitpid(pid_, nullptr, 0);
    if (temporary_output_) std::remove(output_file_.c_str());
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }

  // Sends `signal` to the process alone (its children keep running).
  void send_signal(int signal) const { ::kill(pid_, signal); }

  // The exit code once the process has exited (128 + N when killed by signal N).
  std::optional<int> poll() {
    int status = 0;
    if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_) reaped(status);
    return status_;
  }

  // Waits until the process exits or `deadline` passes; then kills what is left of its group.
  ProcessResult wait_until(std::chrono::steady_clock::time_point deadline) {
    while (!poll() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ProcessResult result;
    if (!status_) {
      result.timed_out = true;
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      reaped(status);
    }
    ::kill(-pid_, SIGKILL);  // any worker a failed launcher left behind
    result.exit_code = *status_;
    result.seconds = std::chrono::duration<double>(end_ - start_).count();
    result.output = output();
    return result;
  }

  ProcessResult wait(std::chrono::seconds timeout = kDefaultProcessTimeout) {
    return wait_until(start_ + timeout);
  }

  // What the process has written so far.
  std::string output() const { return file_contents(output_file_); }

 private:
  static std::vector<char*> c_strings(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings)
      out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  }

  // Forks; the child, in its own process group with stdout and stderr on the output file, runs
  // `in_child` (which does not return).
  void start(const std::function<void()>& in_child) {
    const int fd = open_output();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      in_child();
    }
    ::setpgid(pid_, pid_);
    ::close(fd);
  }

  int open_output() {
    int fd = -1;
    if (output_file_.empty()) {
      std::string name = "/tmp/chexscale-test-output-XXXXXX";
      fd = ::mkstemp(name.data());
      output_file_ = name;
      temporary_output_ = true;
    } else {
      fd = ::open(output_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (fd < 0) throw std::runtime_error("cannot open " + output_file_);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
  }

  void reaped(int status) {
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    end_ = std::chrono::steady_clock::now();
  }

  std::string output_file_;
  bool temporary_output_ = false;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point end_;
  std::optional<int> status_;
};

// Waits for every process until `deadline` (each one's time is taken when it exits), then kills
// what is left.
inline std::vector<ProcessResult> wait_all(const std::vector<Process*>& processes,
                                           std::chrono::steady_clock::time_point deadline) {
  const auto running = [&] {
    bool any = false;
    for (Process* p : processes)
      any = !p->poll() || any;
    return any;
  };
  while (running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<ProcessResult> results;
  for (Process* p : processes)
    results.push_back(p->wait_until(deadline));
  return results;
}

// Starts every process, waits for all of them until `timeout`, then kills what is left.
inline std::vector<ProcessResult> run_processes(std::vector<ProcessSpec> specs,
                                                std::chrono::seconds timeout) {
  std::vector<std::unique_ptr<Process>> owned;
  std::vector<Process*> processes;
  for (auto& spec : specs) {
    owned.push_back(std::make_unique<Process>(std::move(spec)));
    processes.push_back(owned.back().get());
  }
  return wait_all(processes, std::chrono::steady_clock::now() + timeout);
}

inline ProcessResult run_process(ProcessSpec spec,
                                 std::chrono::seconds timeout = kDefaultProcessTimeout) {
  return Process(std::move(spec)).wait(timeout);
}

// Waits until `process` has written `text` after its first `from` characters (at most
// `timeout`); the time it appeared, or nullopt.
inline std::optional<std::chrono::steady_clock::time_point> wait_for_text(
    const Process& process, const std::string& text, size_t from = 0,
    std::chrono::seconds timeout = std::chrono::seconds(90)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string out = process.output();
    if (out.size() > from && out.find(text, from) != std::string::npos) {
      return std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

// The children of process `pid` (a launcher's workers), from /proc.
inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> children;
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (pid_t child = 0; in >> child;)
    children.push_back(child);
  return children;
}

// Runs a /bin/sh command line (environment `env`) to completion.
inline ProcessResult run_shell(const std::string& command,
                               const std::vector<std::string>& env = environment_with(),
                               std::chrono::seconds timeout = kDefaultProcessTimeout) {
  return run_process({{"/bin/sh", "-c", command}, env, ""}, timeout);
}

}  // namespace chexscale::test_util
