// The stop-signal handlers of `chexscale train` in child processes of their own: a second stop
// signal ends a run with kExitFailure, but once the stop checkpoint is written any stop signal
// (as srun --kill-on-bad-exit=1 sends to a rank still exiting) ends it with kExitPreempted.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/stop_signals.h"
#include "train/stop_contract.h"

namespace chexscale::cli {
namespace {

// The exit status of a child that installs the handlers, runs `before_signals`, then gets
// `signals` stop signals (SIGTERM) and waits for them to act.
template <typename Before>
int child_status(int signals, const Before& before_signals) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    install_stop_signals(/*grace_seconds=*/30);
    before_signals();
    for (int k = 0; k < signals; ++k)
      ::raise(SIGTERM);
    ::_exit(0);  // the signals did not end it
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(StopSignals, ASecondSignalEndsTheRunAsAFailure) {
  EXPECT_EQ(child_status(1, [] {}), 0);  // the first only asks for a stop
  EXPECT_EQ(child_status(2, [] {}), kExitFailure);
}

TEST(StopSignals, AfterTheStopCheckpointASignalEndsTheRunAsStopped) {
  EXPECT_EQ(child_status(2, [] { stopped_at_checkpoint(); }), train::kExitPreempted);
  EXPECT_EQ(child_status(1, [] { stopped_at_checkpoint(); }), train::kExitPreempted);
}

}  // namespace
}  // namespace chexscale::cli
