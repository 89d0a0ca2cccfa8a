// Which node a rank is on, for the hierarchical allreduce: every node must run the same number of
// ranks, numbered node by node (rank = node * local_size + local_rank), as chexscale's launcher,
// torchrun, mpirun's default by-slot mapping and Slurm's block distribution number them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace chexscale::distributed {

struct NodeLayout {
  int node = 0;        // this rank's node, 0 .. nodes - 1
  int nodes = 1;       // nodes in the job
  int local_rank = 0;  // this rank's place on its node, 0 .. local_size - 1
  int local_size = 1;  // ranks on every node

  // True when a hierarchical allreduce is the flat one: one node, or one rank per node.
  bool flat() const { return nodes == 1 || local_size == 1; }
  std::string describe() const;  // "node 1 of 2, local rank 0 of 2"
};

// The layout of `rank` from every rank's (local rank, local world size), indexed by rank. Throws
// UsageError naming the first rank that breaks the numbering (unequal nodes, or ranks not
// numbered node by node).
NodeLayout node_layout(int rank, const std::vector<std::pair<int, int>>& local_ranks);

}  // namespace chexscale::distributed
