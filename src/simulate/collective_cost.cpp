// Allreduce cost model (see collective_cost.h).
#include "simulate/collective_cost.h"

#include <algorithm>
#include <cmath>

#include "common/enum_parse.h"

namespace chexscale::simulate {
namespace {

double step_seconds(double chunk_bytes, const NetworkProfile& link) {
  return link.latency_s + chunk_bytes / link.bandwidth_bytes_per_s;
}

// The CPU per byte of the link that carries most of the bytes: the inter-node one when the job
// spans nodes.
const NetworkProfile& busiest_link(const Topology& t, const Links& links) {
  return t.nodes > 1 ? links.inter_node : links.intra_node;
}

}  // namespace

const char* to_string(Algorithm algorithm) {
  return algorithm == Algorithm::kRing ? "ring" : "tree";
}

Algorithm parse_algorithm(std::string_view text) {
  return parse_enum(text, "algorithm", {Algorithm::kRing, Algorithm::kTree});
}

double allreduce_seconds(int64_t bytes, const Topology& t, const Links& links,
                         Algorithm algorithm) {
  const int n = t.world_size();
  if (n <= 1 || bytes <= 0) return 0;
  const auto s = static_cast<double>(bytes);
  if (algorithm == Algorithm::kRing) {
    const double chunk = s / n;
    double step = 0;
    if (t.nodes > 1) step = std::max(step, step_seconds(chunk, links.inter_node));
    if (t.workers_per_node > 1) step = std::max(step, step_seconds(chunk, links.intra_node));
    return 2.0 * (n - 1) * step;
  }
  const double depth = std::ceil(std::log2(static_cast<double>(n)));
  const NetworkProfile& link = busiest_link(t, links);
  return 2.0 * depth * link.latency_s + 2.0 * s / link.bandwidth_bytes_per_s;
}

double allreduce_cpu_seconds(int64_t bytes, const Topology& t, const Links& links) {
  const int n = t.world_size();
  if (n <= 1 || bytes <= 0) return 0;
  const double moved = 4.0 * (n - 1) / n * static_cast<double>(bytes);
  return moved * busiest_link(t, links).cpu_s_per_byte;
}

}  // namespace chexscale::simulate
