// One rank's checkpoint on every rank: resuming when only rank 0 can see the run directory (rank 0
// reads and verifies it, the others receive the training state and every tensor over the process
// group, so that workers need no shared file system), and a survivor's training state from
// memory for the ranks of a regrouped job (--elastic in-place). A failure on the reading rank
// becomes an error on every rank.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "distributed/context.h"
#include "train/checkpoint.h"

namespace chexscale::train {

// Calls `read` on rank `root` only and returns its result on every rank: the same checkpoint
// (state, tensors, path) or nullopt. When `read` throws on `root`, it rethrows it and every
// other rank throws the same kind of error (UsageError, DataError, IoError, else Error) with its
// message. Collective: every rank calls it with the same root; on one rank it is just `read()`.
std::optional<Checkpoint> share_checkpoint(distributed::DistContext& ctx, int root,
                                           const std::function<std::optional<Checkpoint>()>& read);

// share_checkpoint() whose tensors go to `receivers` only (point-to-point from `root`): the
// other ranks learn the outcome (errors included) but get nullopt, and `root` gets read()'s.
// For ranks that hold the tensors already (an in-place regroup's survivors). Collective.
std::optional<Checkpoint> send_checkpoint(distributed::DistContext& ctx, int root,
                                          const std::vector<int>& receivers,
                                          const std::function<std::optional<Checkpoint>()>& read);

// How share_checkpoint() sends the tensors: packed into one flat byte buffer (one broadcast),
// each at a multiple of 64 bytes. The table lists each tensor's name, dtype, shape and offset
// (the JSON that goes ahead of the buffer); `total` is the buffer's size in bytes.
nlohmann::json flat_tensor_table(const std::vector<models::NamedTensor>& tensors, int64_t& total);
// A CPU byte buffer of `bytes` for a flat state, aligned to 2 MiB and advised to the kernel as
// huge-page memory (MADV_HUGEPAGE; advice only). A buffer's first trip through Gloo's sockets
// costs far more in 4 KiB pages: 134 MB broadcast to 2 ranks took 0.7-1.2 s in them and
// 0.13-0.18 s in huge pages on the lab's machine, and a newcomer's buffer is always new.
torch::Tensor flat_buffer(int64_t bytes);
// `tensors` (any device, layout or dtype) copied into a flat_buffer as `table` lays them out.
torch::Tensor pack_flat(const std::vector<models::NamedTensor>& tensors,
                        const nlohmann::json& table, int64_t total);
// The tensors of a received buffer `flat`: views into it, which keep it alive (no copy).
// DataError for a table entry with an unknown dtype or one that lies past the buffer.
std::vector<models::NamedTensor> unpack_flat(const torch::Tensor& flat,
                                             const nlohmann::json& table);

}  // namespace chexscale::train
