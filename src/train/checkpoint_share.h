// One rank's checkpoint on every rank: resuming when only rank 0 can see the run directory (rank 0
// reads and verifies it, the others receive the training state and every tensor over the process
// group, so that workers need no shared file system), and a survivor's training state from
// memory for the ranks of a regrouped job (--elastic in-place). A failure on the reading rank
// becomes an error on every rank.
#pragma once

#include <functional>
#include <optional>

#include "distributed/context.h"
#include "train/checkpoint.h"

namespace chexscale::train {

// Calls `read` on rank `root` only and returns its result on every rank: the same checkpoint
// (state, tensors, path) or nullopt. When `read` throws on `root`, it rethrows it and every
// other rank throws the same kind of error (UsageError, DataError, IoError, else Error) with its
// message. Collective: every rank calls it with the same root; on one rank it is just `read()`.
std::optional<Checkpoint> share_checkpoint(distributed::DistContext& ctx, int root,
                                           const std::function<std::optional<Checkpoint>()>& read);

}  // namespace chexscale::train
