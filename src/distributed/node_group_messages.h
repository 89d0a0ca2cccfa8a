// A node's Gloo group for the hierarchical allreduce: reduce-scatter and allgather of chunks of
// any sizes as point-to-point messages between the node's ranks. LibTorch 1.13's Gloo group has
// no reduce_scatter and wants equal sizes in allgather; every rank here sends each other rank
// the chunk that rank owns at once, so the node's loopback carries (L-1)/L of a bucket per rank
// and phase, and every rank reduces its own share.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/torch_compat.h"

namespace chexscale::distributed {

// `group` (a Gloo group of the node's ranks) with reduce_scatter and allgather as messages:
//   reduce_scatter(out = {chunk}, in = {{chunk 0, ..., chunk L-1}}): `chunk` (the caller's own
//     chunk, which may be in[0][rank] itself) becomes the reduction of every rank's in[0][rank];
//   allgather(out = {{chunk 0, ..., chunk L-1}}, in = {chunk}): out[0][r] becomes rank r's chunk.
// Chunks may differ in size between ranks (each rank passes the same sizes) and may be empty.
// Both run on the caller's thread and return a completed Work; every other collective is the
// wrapped group's.
c10::intrusive_ptr<compat::CollectiveGroup> make_node_group_of_messages(
    c10::intrusive_ptr<compat::CollectiveGroup> group);

}  // namespace chexscale::distributed
