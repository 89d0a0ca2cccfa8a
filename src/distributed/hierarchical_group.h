// Hierarchical allreduce (--hierarchical, Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE): each node's
// ranks reduce to their leader over the node's fastest path (loopback for Gloo, shared memory for
// MPI), the leaders (one per node) allreduce over the network, and each leader broadcasts the sum
// back inside its node. Every gradient byte crosses the inter-node link once per node instead of
// once per rank. The group stands in for the flat one behind the same interface, so the reducer's
// buckets, overlap and compression are unchanged.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include "common/torch_compat.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "distributed/node_layout.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

// The node's group and, on a leader, the leaders' group (nullptr on the other ranks).
struct NodeGroups {
  c10::intrusive_ptr<compat::CollectiveGroup> node;
  c10::intrusive_ptr<compat::CollectiveGroup> leaders;
};

// Throws UsageError unless `backend` is gloo or mpi (NCCL builds its own hierarchy inside).
void require_hierarchical_backend(Backend backend);

// Gloo: the node's ranks over loopback (store prefix "hier/node<N>"), the leaders over `address`
// ("hier/leaders"). MPI: MPI_COMM_WORLD split by node and into the leaders (every rank calls it),
// the leaders allreducing by `mpi_allreduce` (auto: chexscale's ring, as they span nodes).
NodeGroups make_node_groups(Backend backend, const c10::intrusive_ptr<c10d::Store>& store,
                            const RendezvousEnv& env, const GlooAddress& address,
                            std::chrono::milliseconds timeout, const NodeLayout& layout,
                            MpiAllreduce mpi_allreduce);

// The group whose allreduce is node reduce -> leaders' allreduce -> node broadcast. Every
// collective (broadcast, allgather and barrier go to `world`) runs on one thread of the group, in
// the order submitted, so that every rank runs the stages in the same order; a bucket's stages
// therefore do not overlap the next bucket's (they do overlap backward, as the flat path does).
c10::intrusive_ptr<compat::CollectiveGroup> make_hierarchical_group(
    c10::intrusive_ptr<compat::CollectiveGroup> world, NodeGroups groups);

}  // namespace chexscale::distributed
