// Spawning and reaping one worker process (see worker_process.h).
#include "launch/worker_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

extern char** environ;

namespace chexscale::launch {
namespace {

// NUL-terminated string arrays for execve, built before fork (the child may only call
// async-signal-safe functions).
struct CStrings {
  std::vector<std::string> storage;
  std::vector<char*> pointers;
  char** get() {
    pointers.clear();
    for (auto& s : storage)
      pointers.push_back(s.data());
    pointers.push_back(nullptr);
    return pointers.data();
  }
};

// In the forked child: moves this process into each cgroup ("0" in cgroup.procs is the writer
// itself, in cgroup v1 and v2). Async-signal-safe; false if a write fails.
bool join_cgroups(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, "0", 1) == 1;
    ::close(fd);
    if (!ok) return false;
  }
  return true;
}

// In the forked child, with every signal blocked: handlers inherited from the launcher (its stop
// signals write into the launcher's own pipe) go back to the default, so that a signal sent to
// the new worker before its execve ends it instead of reading as one the launcher got. Ignored
// signals (SIGPIPE) stay ignored, as across execve.
void reset_caught_signals() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction current {};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) continue;
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    ::sigemptyset(&fallback.sa_mask);
    ::sigaction(sig, &fallback, nullptr);
  }
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw Error(fmt::format("pipe(): {}", std::strerror(errno)));
  }
}

}  // namespace

WorkerProcess::WorkerProcess(int rank, const std::string& program,
                             const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env,
                             const std::vector<std::string>& cgroups)
    : rank_(rank) {
  CStrings argv, envp;
  argv.storage.push_back(program);
  argv.storage.insert(argv.storage.end(), args.begin(), args.end());
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (env.count(entry.substr(0, entry.find('='))) == 0) envp.storage.push_back(entry);
  }
  for (const auto& [name, value] : env)
    envp.storage.push_back(name + "=" + value);
  int out[2], err[2];
  make_pipe(out);
  make_pipe(err);
  const pid_t parent = ::getpid();
  char** child_argv = argv.get();
  char** child_envp = envp.get();
  sigset_t all, before;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);  // no handler runs in the child before the reset
  pid_ = ::fork();
  if (pid_ == 0) {
    reset_caught_signals();
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans if the launcher is killed
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    if (!join_cgroups(cgroups)) {
      const char msg[] = "chexscale launch: the worker cannot join its --worker-cgroup\n";
      [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
      ::_exit(127);
    }
    ::execve(child_argv[0], child_argv, child_envp);
    const char msg[] = "chexscale launch: exec of the worker program failed\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid_ < 0) throw Error(fmt::format("fork(): {}", std::strerror(fork_errno)));
  ::setpgid(pid_, pid_);  // also from the parent, so signal() works before the child runs
  ::close(out[1]);
  ::close(err[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
  ::fcntl(out_fd_, F_SETFL, O_NONBLOCK);
  ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : rank_(other.rank_),
      pid_(other.pid_),
      out_fd_(other.out_fd_),
      err_fd_(other.err_fd_),
      status_(other.status_) {
  other.pid_ = -1;
  other.out_fd_ = other.err_fd_ = -1;
}

WorkerProcess::~WorkerProcess() {
  if (pid_ > 0 && running()) {
    signal(SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

void WorkerProcess::signal(int sig) const {
  if (pid_ > 0 && running()) ::kill(-pid_, sig);
}

std::optional<int> WorkerProcess::poll_exit() {
  if (status_ || pid_ <= 0) return status_;
  int raw = 0;
  if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  }
  return status_;
}

std::string describe_exit(int status) {
  if (status > 128) {
    return fmt::format("signal {} ({})", status - 128, ::strsignal(status - 128));
  }
  return fmt::format("exit status {}", status);
}

}  // namespace chexscale::launch
