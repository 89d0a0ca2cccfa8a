// How `chexscale train` stops on request, the contract its launchers rely on: a stop signal
// (SIGTERM, SIGINT, SIGUSR1) gives it --stop-grace seconds to stop at a step the ranks agree on,
// write a checkpoint and exit with kExitPreempted ("stopped at a checkpoint, resume me").
#pragma once

#include <string>

namespace chexscale::train {

// "Preempted, resume me": EX_TEMPFAIL of sysexits.h, distinct from any death by a signal.
inline constexpr int kExitPreempted = 75;

// Seconds from a stop signal to the exit (--stop-grace): under Kubernetes' default 30 s
// terminationGracePeriodSeconds.
inline constexpr int kDefaultStopGrace = 25;
inline constexpr int kMaxStopGrace = 3600;

// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string stop_signal_name(int signal);

}  // namespace chexscale::train
