// What one allreduce costs on a topology of nodes x workers per node: the alpha-beta cost of the
// algorithm's steps on the slowest link they cross, and the CPU time it takes each rank.
#pragma once

#include <cstdint>
#include <string_view>

#include "simulate/network_profile.h"

namespace chexscale::simulate {

// Ring: 2(n-1) steps of S/n bytes (Gloo's and NCCL's ring). Tree: a pipelined reduce and
// broadcast down a binary tree (NCCL's tree): 2 log2(n) latencies and 2 S / B. Hierarchical
// (the reducer's --hierarchical), one stage after the other: a reduce-scatter inside each node of
// L workers (L-1 intra-node steps of S/L), an allreduce of each worker's S/L across the N nodes
// (the L rings run at once and share the node's link: 2(N-1) inter-node steps of S/N), and an
// allgather inside the node (L-1 intra-node steps of S/L).
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
// hierarchical one: 4 (L-1)/L S inside the node at the intra-node path's rate and 4 (N-1)/N S/L
// across the nodes at the inter-node one (every rank of a node does the same share).
double allreduce_cpu_seconds(int64_t bytes, const Topology& topology, const Links& links,
                             Algorithm algorithm);

}  // namespace chexscale::simulate
