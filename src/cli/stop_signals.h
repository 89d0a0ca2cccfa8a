// Stopping `chexscale train` on request: SIGTERM, SIGINT and SIGUSR1 (Slurm's
// --signal=B:USR1@N) ask the trainer to stop at an agreed step, checkpoint and exit with
// kExitPreempted; a second one, or --stop-grace seconds running out, ends the process at once
// with kExitFailure, removing any file a write left unfinished.
#pragma once

#include <atomic>
#include <string>

namespace chexscale::cli {

constexpr int kExitFailure = 1;
// "Preempted, resume me": EX_TEMPFAIL of sysexits.h, distinct from any death by a signal.
constexpr int kExitPreempted = 75;

// Installs the handlers for the rest of the process; the returned flag holds the first stop
// signal (0 until one arrives), for TrainerOptions::stop_request.
const std::atomic<int>& install_stop_signals(int grace_seconds);

// "SIGTERM", "SIGINT", "SIGUSR1", or "a stop signal" for 0 or any other.
std::string stop_signal_name(int signal);

}  // namespace chexscale::cli
