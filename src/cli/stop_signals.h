// Stopping `chexscale train` on request: SIGTERM, SIGINT and SIGUSR1 (Slurm's
// --signal=B:USR1@N) ask the trainer to stop at an agreed step, checkpoint and exit with
// train::kExitPreempted (train/stop_contract.h); a second one, or --stop-grace seconds running
// out, ends the process at once with kExitFailure, removing any file a write left unfinished;
// once the stop checkpoint is written, with train::kExitPreempted.
#pragma once

#include <atomic>

namespace chexscale::cli {

constexpr int kExitFailure = 1;

// Installs the handlers for the rest of the process; the returned flag holds the first stop
// signal (0 until one arrives), for TrainerOptions::stop_request.
const std::atomic<int>& install_stop_signals(int grace_seconds);

// Says that the stop checkpoint is written and every rank is past it: from now on a stop signal
// ends the process at once with train::kExitPreempted, not kExitFailure (srun
// --kill-on-bad-exit=1 sends one to the ranks still exiting when the first has exited with it).
void stopped_at_checkpoint();

}  // namespace chexscale::cli
