// The allreduce cost model against costs worked out by hand: ring steps on the slowest link kind,
// ring steps from a profile's measured allreduces, the tree's latency and bandwidth terms, the
// hierarchical path's three stages, one worker free, the CPU per byte moved.
#include <gtest/gtest.h>

#include "common/error.h"
#include "simulate/collective_cost.h"

namespace chexscale::simulate {
namespace {

NetworkProfile link(double latency_s, double bandwidth) {
  NetworkProfile p;
  p.latency_s = latency_s;
  p.bandwidth_bytes_per_s = bandwidth;
  return p;
}

TEST(CollectiveCost, RingOfTwoNodesIsTwoStepsOfHalfTheMessage) {
  const Links links{link(1e-4, 1e8), link(1e-6, 1e10)};
  // 2 (n-1) = 2 steps of 1e-4 + 0.5e6 / 1e8 = 0.0051 s.
  EXPECT_NEAR(allreduce_seconds(1'000'000, {2, 1}, links, Algorithm::kRing), 0.0102, 1e-12);
}

TEST(CollectiveCost, RingStepCostsTheSlowerOfTheLinksItCrosses) {
  const Links links{link(1e-4, 1e8), link(1e-5, 1e9)};
  // 2 nodes x 2 workers: 6 steps of 1 MB chunks; inter 1e-4 + 1e6/1e8 = 0.0101 beats intra's
  // 1e-5 + 1e-3.
  EXPECT_NEAR(allreduce_seconds(4'000'000, {2, 2}, links, Algorithm::kRing), 6 * 0.0101, 1e-12);
  // One node of 4: only the intra-node link: 6 x (1e-5 + 1e6/1e9).
  EXPECT_NEAR(allreduce_seconds(4'000'000, {1, 4}, links, Algorithm::kRing), 6 * 0.00101, 1e-12);
}

TEST(CollectiveCost, MeasuredSamplesAreInterpolatedAndScaledToTheRing) {
  // Measured on 2 ranks: 1 MB in 0.01 s, 3 MB in 0.05 s (a ring step of c bytes costs half the
  // measured time of 2c bytes).
  NetworkProfile measured = link(0, 1e8);
  measured.measured_world_size = 2;
  measured.samples = {{1'000'000, 0.01}, {3'000'000, 0.05}};
  const Links links{measured, measured};
  const auto ring = [&](int64_t bytes, int nodes) {
    return allreduce_seconds(bytes, {nodes, 1}, links, Algorithm::kRing);
  };
  EXPECT_NEAR(ring(1'000'000, 2), 0.01, 1e-12);                     // a measured size, as measured
  EXPECT_NEAR(ring(2'000'000, 2), 0.03, 1e-12);                     // between: linear
  EXPECT_NEAR(ring(5'000'000, 2), 0.05 + 2e-8 * 2'000'000, 1e-12);  // beyond: the last slope
  EXPECT_NEAR(ring(500'000, 2), 0.005, 1e-12);  // below: towards the line's zero latency
  // 4 nodes, 2 MB: 6 steps of 0.5 MB chunks, each half the measured 1 MB time.
  EXPECT_NEAR(ring(2'000'000, 4), 6 * 0.005, 1e-12);
}

TEST(CollectiveCost, TreeHasLogLatencyAndTwiceTheBytes) {
  const Links links{link(1e-4, 1e8), link(1e-6, 1e10)};
  // 8 nodes: 2 log2(8) = 6 latencies + 2 S / B.
  EXPECT_NEAR(allreduce_seconds(1'000'000, {8, 1}, links, Algorithm::kTree), 6e-4 + 0.02, 1e-12);
}

TEST(CollectiveCost, HierarchicalIsNodeReduceScatterThenAcrossNodesThenNodeAllgather) {
  const Links links{link(1e-4, 1e8), link(1e-5, 1e9)};
  // 2 nodes x 2 workers, 4 MB. Reduce-scatter in the node: 1 step of 2 MB at 1e-5 + 2e6/1e9 =
  // 0.00201; across the nodes two rings of 2 MB sharing the link: 2 steps of 2 MB at 1e-4 +
  // 2e6/1e8 = 0.0201; allgather: 1 step of 2 MB, 0.00201.
  const double want = 0.00201 + 2 * 0.0201 + 0.00201;
  EXPECT_NEAR(allreduce_seconds(4'000'000, {2, 2}, links, Algorithm::kHierarchical), want, 1e-12);
  // The flat ring's 6 inter-node steps of 1 MB (0.0606 s) cost more when the fabric is the limit.
  EXPECT_GT(allreduce_seconds(4'000'000, {2, 2}, links, Algorithm::kRing), 1.2 * want);
  // 2 nodes x 4: reduce-scatter and allgather 3 steps of 1 MB each, across as above.
  const double eight = 6 * (1e-5 + 1e-3) + 2 * 0.0201;
  EXPECT_NEAR(allreduce_seconds(4'000'000, {2, 4}, links, Algorithm::kHierarchical), eight, 1e-12);
  // One worker per node: the ring across the nodes alone, the flat ring of the nodes.
  EXPECT_NEAR(allreduce_seconds(4'000'000, {4, 1}, links, Algorithm::kHierarchical),
              allreduce_seconds(4'000'000, {4, 1}, links, Algorithm::kRing), 1e-12);
}

TEST(CollectiveCost, HierarchicalCpuIsEachRanksShareOnEachPath) {
  Links links{link(1e-4, 1e8), link(1e-6, 1e10)};
  links.inter_node.cpu_s_per_byte = 1e-9;
  links.intra_node.cpu_s_per_byte = 1e-12;
  // 2 x 2, 1 MB: inside 4 (1/2) S = 2e6 bytes at 1e-12, across 4 (1/2) S/2 = 1e6 at 1e-9.
  EXPECT_NEAR(allreduce_cpu_seconds(1'000'000, {2, 2}, links, Algorithm::kHierarchical),
              2e-6 + 1e-3, 1e-15);
}

TEST(CollectiveCost, OneWorkerCostsNothing) {
  const Links links{link(1e-4, 1e8), link(1e-6, 1e10)};
  EXPECT_EQ(allreduce_seconds(1'000'000, {1, 1}, links, Algorithm::kRing), 0.0);
  EXPECT_EQ(allreduce_cpu_seconds(1'000'000, {1, 1}, links, Algorithm::kRing), 0.0);
}

TEST(CollectiveCost, CpuIsTheBytesEachRankSendsAndReceivesTimesCpuPerByte) {
  Links links{link(1e-4, 1e8), link(1e-6, 1e10)};
  links.inter_node.cpu_s_per_byte = 1e-9;
  links.intra_node.cpu_s_per_byte = 1e-12;
  // n = 2: 4 (n-1)/n S = 2e6 bytes over the inter-node link.
  EXPECT_NEAR(allreduce_cpu_seconds(1'000'000, {2, 1}, links, Algorithm::kRing), 2e-3, 1e-15);
  // One node: the intra-node link's cost.
  EXPECT_NEAR(allreduce_cpu_seconds(1'000'000, {1, 2}, links, Algorithm::kRing), 2e-6, 1e-18);
}

TEST(CollectiveCost, AlgorithmNamesParseAndABadOneSaysTheChoices) {
  EXPECT_EQ(parse_algorithm("tree"), Algorithm::kTree);
  EXPECT_EQ(parse_algorithm("hierarchical"), Algorithm::kHierarchical);
  EXPECT_STREQ(to_string(Algorithm::kRing), "ring");
  try {
    parse_algorithm("mesh");
    FAIL() << "mesh parsed";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "algorithm 'mesh': choose ring, tree or hierarchical");
  }
}

}  // namespace
}  // namespace chexscale::simulate
