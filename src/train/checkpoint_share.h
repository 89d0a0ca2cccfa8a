// Resuming when only rank 0 can see the run directory: rank 0 reads and verifies the checkpoint
// and the other ranks receive it (training state and every tensor) over the process group, so
// that workers need no shared file system. A failure on rank 0 becomes an error on every rank.
#pragma once

#include <functional>
#include <optional>

#include "distributed/context.h"
#include "train/checkpoint.h"

namespace chexscale::train {

// Calls `read` on rank 0 only and returns its result on every rank: the same checkpoint (state,
// tensors, path) or nullopt. When `read` throws on rank 0, rank 0 rethrows it and every other
// rank throws the same kind of error (UsageError, DataError, IoError, else Error) with its
// message. Collective: every rank calls it; on one rank it is just `read()`.
std::optional<Checkpoint> read_checkpoint_on_rank0(
    distributed::DistContext& ctx, const std::function<std::optional<Checkpoint>()>& read);

}  // namespace chexscale::train
