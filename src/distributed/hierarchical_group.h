// Hierarchical allreduce (--hierarchical; Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE over NCCL, and
// NCCL's own inside a node): a bucket is cut into one chunk per local rank; the node's ranks
// reduce-scatter the chunks over the node's fastest path (loopback for Gloo, shared memory for
// MPI), so that each holds the node's sum of its own chunk; each rank allreduces its chunk with the
// ranks of the same local rank on the other nodes over the network; and the node's ranks allgather
// the chunks back. Every gradient byte crosses the inter-node link once per node instead of once
// per rank, and every rank of a node does the same share of the work. The group stands in for the
// flat one behind the same interface, so the reducer's buckets, overlap and compression are
// unchanged.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>

#include "common/torch_compat.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "distributed/node_layout.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

// The node's group (its reduce_scatter and allgather take chunks of any sizes) and the group of
// this rank's local rank on every node.
struct NodeGroups {
  c10::intrusive_ptr<compat::CollectiveGroup> node;
  c10::intrusive_ptr<compat::CollectiveGroup> across;
};

// Throws UsageError unless `backend` is gloo or mpi (NCCL builds its own hierarchy inside).
void require_hierarchical_backend(Backend backend);

// Gloo: the node's ranks over loopback (store prefix "hier/node<N>", its exchanges as messages),
// local rank L of every node over `address` ("hier/across<L>"). MPI: MPI_COMM_WORLD split by node
// and by local rank (every rank calls both), the second allreducing by `mpi_allreduce` (auto:
// chexscale's ring, as its ranks span nodes).
NodeGroups make_node_groups(Backend backend, const c10::intrusive_ptr<c10d::Store>& store,
                            const RendezvousEnv& env, const GlooAddress& address,
                            std::chrono::milliseconds timeout, const NodeLayout& layout,
                            MpiAllreduce mpi_allreduce);

// The group whose allreduce is node reduce-scatter -> allreduce across -> node allgather while
// `node_by_node` holds true, and `world`'s own flat allreduce while it holds false
// (--hierarchical=auto switches it between steps, when no allreduce is in flight, on every rank
// alike). Every other collective goes to `world`. Everything but the flat allreduce runs on one
// thread of the group, in the order submitted, so that every rank runs the stages in the same
// order; a bucket's stages therefore do not overlap the next bucket's (they do overlap backward,
// as the flat path does).
c10::intrusive_ptr<compat::CollectiveGroup> make_hierarchical_group(
    c10::intrusive_ptr<compat::CollectiveGroup> world, NodeGroups groups,
    std::shared_ptr<const std::atomic<bool>> node_by_node);

}  // namespace chexscale::distributed
