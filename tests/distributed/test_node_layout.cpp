// node_layout(): the node of each rank for the hierarchical allreduce, and the usage errors for
// nodes of unequal size and ranks not numbered node by node.
#include <gtest/gtest.h>

#include "common/error.h"
#include "distributed/node_layout.h"
#include "test_util/error_message.h"

namespace chexscale::distributed {
namespace {

std::vector<std::pair<int, int>> nodes_of(int nodes, int per_node) {
  std::vector<std::pair<int, int>> ranks;
  for (int r = 0; r < nodes * per_node; ++r)
    ranks.emplace_back(r % per_node, per_node);
  return ranks;
}

TEST(NodeLayout, RanksNumberedNodeByNode) {
  const auto ranks = nodes_of(3, 4);
  const NodeLayout seven = node_layout(7, ranks);
  EXPECT_EQ(seven.node, 1);
  EXPECT_EQ(seven.nodes, 3);
  EXPECT_EQ(seven.local_rank, 3);
  EXPECT_EQ(seven.local_size, 4);
  EXPECT_FALSE(seven.flat());
  EXPECT_EQ(node_layout(11, ranks).describe(), "node 2 of 3, local rank 3 of 4");
}

TEST(NodeLayout, OneNodeOrOneRankPerNodeIsFlat) {
  EXPECT_TRUE(node_layout(2, nodes_of(1, 4)).flat());
  EXPECT_TRUE(node_layout(2, nodes_of(4, 1)).flat());
  EXPECT_EQ(node_layout(2, nodes_of(4, 1)).node, 2);
}

TEST(NodeLayout, UnequalNodesAreRefusedNamingTheRank) {
  auto ranks = nodes_of(2, 2);
  ranks[3] = {1, 3};
  const std::string message = test_util::message_of<UsageError>([&] { node_layout(0, ranks); });
  EXPECT_NE(message.find("rank 3's node runs 3, rank 0's 2"), std::string::npos) << message;
  const std::string odd = test_util::message_of<UsageError>([&] {
    node_layout(0, {{0, 2}, {1, 2}, {0, 2}});
  });
  EXPECT_NE(odd.find("rank 0 says its node runs 2 of the job's 3 ranks"), std::string::npos) << odd;
}

TEST(NodeLayout, RoundRobinNumberingIsRefused) {
  // rank 1 on the second node: local ranks 0, 0, 1, 1
  const std::string message = test_util::message_of<UsageError>([&] {
    node_layout(2, {{0, 2}, {0, 2}, {1, 2}, {1, 2}});
  });
  EXPECT_NE(message.find("rank 1 has local rank 0, not 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace chexscale::distributed
