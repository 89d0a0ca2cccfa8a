// The stop-signal handlers of `chexscale train` (see stop_signals.h). The handlers only touch a
// lock-free atomic, alarm(), write(), unlink() (remove_unfinished_files) and _exit().
#include "cli/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "train/stop_contract.h"

namespace chexscale::cli {
namespace {

std::atomic<int> g_stop_signal{0};
std::atomic<bool> g_checkpointed{false};
int g_grace_seconds = 0;

void write_stderr(const char* text, size_t size) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, text, size);
}

[[noreturn]] void end_now(const char* why, size_t size) {
  write_stderr(why, size);
  remove_unfinished_files();
  ::_exit(kExitFailure);
}

// After the stop checkpoint, whatever ends the process ends it as stopped at a checkpoint.
void end_if_checkpointed(const char* why, size_t size) {
  if (!g_checkpointed.load()) return;
  write_stderr(why, size);
  ::_exit(train::kExitPreempted);
}

void on_stop_signal(int sig) {
  static constexpr char kLate[] =
      "chexscale train: a stop signal after the stop checkpoint: exiting at once\n";
  end_if_checkpointed(kLate, sizeof kLate - 1);
  int none = 0;
  if (!g_stop_signal.compare_exchange_strong(none, sig)) {
    static constexpr char kWhy[] = "chexscale train: second stop signal: ending now\n";
    end_now(kWhy, sizeof kWhy - 1);
  }
  ::alarm(static_cast<unsigned>(g_grace_seconds));
}

void on_grace_over(int) {
  static constexpr char kLate[] =
      "chexscale train: --stop-grace ran out after the stop checkpoint: exiting at once\n";
  end_if_checkpointed(kLate, sizeof kLate - 1);
  static constexpr char kWhy[] = "chexscale train: --stop-grace ran out: ending now\n";
  end_now(kWhy, sizeof kWhy - 1);
}

void handle(int sig, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  action.sa_flags = SA_RESTART;  // the loader's and the process group's system calls go on
  sigemptyset(&action.sa_mask);
  ::sigaction(sig, &action, nullptr);
}

}  // namespace

const std::atomic<int>& install_stop_signals(int grace_seconds) {
  static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");
  g_grace_seconds = grace_seconds;
  handle(SIGALRM, on_grace_over);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1})
    handle(sig, on_stop_signal);
  return g_stop_signal;
}

void stopped_at_checkpoint() {
  static_assert(std::atomic<bool>::is_always_lock_free, "the handler reads it");
  g_checkpointed.store(true);
}

}  // namespace chexscale::cli
