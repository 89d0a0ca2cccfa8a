// What one allreduce costs on a topology of nodes x workers per node: the alpha-beta cost of the
// algorithm's steps on the slowest link they cross, and the CPU time it takes each rank.
#pragma once

#include <cstdint>
#include <string_view>

#include "simulate/network_profile.h"

namespace chexscale::simulate {

// Ring: 2(n-1) steps of S/n bytes (Gloo's and NCCL's ring). Tree: a pipelined reduce and
// broadcast down a binary tree (NCCL's tree): 2 log2(n) latencies and 2 S / B. Hierarchical
// (the reducer's --hierarchical): a reduce inside each node of L workers (Gloo's ring reduce:
// 2(L-1) intra-node steps of S/L), a ring among the N node leaders (2(N-1) inter-node steps of
// S/N), and a broadcast inside the node (a binomial tree: ceil(log2 L) intra-node steps of S),
// one after the other.
enum class Algorithm { kRing, kTree, kHierarchical };

const char* to_string(Algorithm algorithm);        // "ring", "tree", "hierarchical"
Algorithm parse_algorithm(std::string_view text);  // UsageError naming the valid values

struct Topology {
  int nodes = 1;
  int workers_per_node = 1;
  int world_size() const { return nodes * workers_per_node; }
};

// The links of a system: between nodes, and between workers of one node.
struct Links {
  NetworkProfile inter_node;
  NetworkProfile intra_node;
};

// Seconds one allreduce of `bytes` takes (0 for one worker). Ranks are placed node by node, so a
// ring crosses the node boundary on one link per node: a ring step costs the slowest of the
// link kinds present.
double allreduce_seconds(int64_t bytes, const Topology& topology, const Links& links,
                         Algorithm algorithm);

// Process CPU seconds one allreduce of `bytes` costs each rank: the bytes it sends and receives
// (4 (n-1)/n S for the ring's and the tree's bandwidth term) times the path's CPU per byte. The
// hierarchical one is a node leader's, its busiest rank: 4 (L-1)/L S plus ceil(log2 L) S inside
// the node at the intra-node path's rate and 4 (N-1)/N S among the leaders at the inter-node one.
double allreduce_cpu_seconds(int64_t bytes, const Topology& topology, const Links& links,
                             Algorithm algorithm);

}  // namespace chexscale::simulate
