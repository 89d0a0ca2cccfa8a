// node_layout(): the node of a rank, checked against every rank's local rank and size.
#include "distributed/node_layout.h"

#include <fmt/format.h>

#include "common/error.h"

namespace chexscale::distributed {

std::string NodeLayout::describe() const {
  return fmt::format("node {} of {}, local rank {} of {}", node, nodes, local_rank, local_size);
}

NodeLayout node_layout(int rank, const std::vector<std::pair<int, int>>& local_ranks) {
  const int world = static_cast<int>(local_ranks.size());
  if (rank < 0 || rank >= world)
    throw Error(fmt::format("node_layout: rank {} outside a world of {}", rank, world));
  const int local_size = local_ranks[0].second;
  if (local_size < 1 || world % local_size != 0) {
    throw UsageError(fmt::format(
        "--hierarchical needs the same number of ranks on every node: rank 0 says its node runs "
        "{} of the job's {} ranks",
        local_size, world));
  }
  for (int r = 0; r < world; ++r) {
    const auto [local_rank, size] = local_ranks[r];
    if (size != local_size) {
      throw UsageError(fmt::format(
          "--hierarchical needs the same number of ranks on every node: rank {}'s node runs {}, "
          "rank 0's {}",
          r, size, local_size));
    }
    if (local_rank != r % local_size) {
      throw UsageError(fmt::format(
          "--hierarchical needs ranks numbered node by node (rank = node * {} + local rank): "
          "rank {} has local rank {}, not {}",
          local_size, r, local_rank, r % local_size));
    }
  }
  return NodeLayout{rank / local_size, world / local_size, rank % local_size, local_size};
}

}  // namespace chexscale::distributed
