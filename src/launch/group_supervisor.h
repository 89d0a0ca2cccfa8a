// Supervising one started group of local workers until every one has exited: their output
// relayed with a rank prefix, a stop signal to the launcher (SIGTERM, SIGINT, SIGUSR1) forwarded
// to them with a grace before SIGKILL, the group torn down when one worker fails, and a caller's
// hook that may end the group (the elastic agent: a lost node, a membership change).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "launch/worker_process.h"

namespace chexscale::launch {

// The launcher's SIGTERM/SIGINT/SIGUSR1 handlers for as long as it lives (a self-pipe the
// supervision loop polls); SIGPIPE is ignored meanwhile.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int fd() const;
  // The next signal received (0 when none is pending).
  int take() const;
};

// What the caller's hook asks of a running group.
enum class GroupRequest {
  kNone,
  kStop,  // SIGTERM: the workers checkpoint at an agreed step and exit; killed after stop_grace
  kKill,  // SIGKILL now: the group cannot go on (a peer node is gone)
};

struct SuperviseOptions {
  std::chrono::duration<double> grace_period{5.0};  // after a worker failed: SIGTERM -> SIGKILL
  std::chrono::duration<double> stop_grace{26.0};   // after a stop signal: -> SIGKILL
  int output_fd = 1;
  int error_fd = 2;
  // Called about every 100 ms until the group has exited (it may keep a heartbeat); its first
  // request other than kNone is acted on. nullptr: never.
  std::function<GroupRequest()> hook;
};

// How one start of the group ended.
struct GroupOutcome {
  std::vector<int> statuses;  // per worker, in start order: exit code or 128 + signal
  int failed_rank = -1;       // the first worker to fail (not counting kExitPreempted)
  int failed_status = 0;
  int signal = 0;          // the first stop signal the launcher forwarded
  bool preempted = false;  // some worker exited kExitPreempted on its own or on a signal
  bool killed = false;     // the stop grace ran out and the group was killed
  GroupRequest request = GroupRequest::kNone;  // what the hook asked, if anything

  // Every worker exited kExitPreempted.
  bool all_preempted() const;
  // "ranks 0, 1 exited 75 (stopped at a checkpoint); rank 2 ended with signal 9 (Killed);
  // SIGKILL sent when the grace ran out".
  std::string describe_stop(const std::vector<WorkerProcess>& workers) const;
};

// Supervises `workers` until all have exited and their output is drained.
GroupOutcome supervise(std::vector<WorkerProcess>& workers, const SuperviseOptions& options,
                       const StopSignals& signals);

}  // namespace chexscale::launch
