// The elastic launcher (`chexscale launch --nnodes MIN:MAX`): this node's agent meets the other
// nodes' agents round after round in the rendezvous server's store (elastic_rendezvous.h),
// starts its workers as clients of that store with the round's world size and ranks, keeps a
// heartbeat, and ends the round when one of its workers fails, another node goes silent, or a
// node waits to join; then every agent stops its workers and joins the next round, whose workers
// resume from the last checkpoint. A stop signal ends the whole job at a checkpoint (exit 75).
#pragma once

#include "launch/local_launcher.h"

namespace chexscale::launch {

// Runs this node's part of an elastic job to its end (options resolved, options.elastic()).
LaunchResult run_elastic_group(const LaunchOptions& options);

}  // namespace chexscale::launch
