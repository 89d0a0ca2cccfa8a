// Allreduce cost model (see collective_cost.h).
#include "simulate/collective_cost.h"

#include <algorithm>
#include <cmath>

#include "common/enum_parse.h"

namespace chexscale::simulate {
namespace {

// The measured allreduce time at `bytes` on the profile's own ring: linear between measured
// sizes, along the last segment beyond the largest (the line's slope where that one does not
// rise), and between the line's intercept and the smallest below it.
double measured_seconds(double bytes, const NetworkProfile& link) {
  const std::vector<AllreduceSample>& s = link.samples;
  const double m = link.measured_world_size;
  const double line_slope = 2.0 * (m - 1.0) / (m * link.bandwidth_bytes_per_s);
  const auto x = [&](size_t i) { return static_cast<double>(s[i].bytes); };
  if (bytes <= x(0)) {
    const double intercept = std::min(2.0 * (m - 1.0) * link.latency_s, s[0].seconds);
    return intercept + (s[0].seconds - intercept) * bytes / x(0);
  }
  const size_t last = s.size() - 1;
  if (bytes >= x(last)) {
    double slope = last > 0 ? (s[last].seconds - s[last - 1].seconds) / (x(last) - x(last - 1)) : 0;
    if (!(slope > 0)) slope = line_slope;
    return s[last].seconds + slope * (bytes - x(last));
  }
  const size_t hi = static_cast<size_t>(
      std::upper_bound(s.begin(), s.end(), bytes,
                       [](double b, const AllreduceSample& e) { return b < e.bytes; }) -
      s.begin());
  const double f = (bytes - x(hi - 1)) / (x(hi) - x(hi - 1));
  return s[hi - 1].seconds + f * (s[hi].seconds - s[hi - 1].seconds);
}

// One ring step of `chunk_bytes`. From the measured allreduces where the profile has them: the
// measured ring of m ranks made 2(m-1) steps of S/m bytes, so a step of c bytes costs
// t(m c) / (2(m-1)). Else the line: alpha + c / B.
double step_seconds(double chunk_bytes, const NetworkProfile& link) {
  if (!link.samples.empty() && link.measured_world_size >= 2) {
    const double m = link.measured_world_size;
    return measured_seconds(chunk_bytes * m, link) / (2.0 * (m - 1.0));
  }
  return link.latency_s + chunk_bytes / link.bandwidth_bytes_per_s;
}

// The CPU per byte of the link that carries most of the bytes: the inter-node one when the job
// spans nodes.
const NetworkProfile& busiest_link(const Topology& t, const Links& links) {
  return t.nodes > 1 ? links.inter_node : links.intra_node;
}

// Steps of a binomial-tree broadcast among n ranks.
double tree_depth(int n) {
  return std::ceil(std::log2(static_cast<double>(n)));
}

// Node reduce-scatter, allreduce across the nodes, node allgather (see Algorithm::kHierarchical).
double hierarchical_seconds(double s, const Topology& t, const Links& links) {
  const int l = t.workers_per_node, n = t.nodes;
  double seconds = 0;
  if (l > 1) seconds += 2.0 * (l - 1) * step_seconds(s / l, links.intra_node);
  if (n > 1) seconds += 2.0 * (n - 1) * step_seconds(s / n, links.inter_node);
  return seconds;
}

}  // namespace

const char* to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHierarchical:
      return "hierarchical";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view text) {
  return parse_enum(text, "algorithm",
                    {Algorithm::kRing, Algorithm::kTree, Algorithm::kHierarchical});
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
  if (algorithm == Algorithm::kHierarchical) return hierarchical_seconds(s, t, links);
  const double depth = tree_depth(n);
  const NetworkProfile& link = busiest_link(t, links);
  return 2.0 * depth * link.latency_s + 2.0 * s / link.bandwidth_bytes_per_s;
}

double allreduce_cpu_seconds(int64_t bytes, const Topology& t, const Links& links,
                             Algorithm algorithm) {
  const int n = t.world_size();
  if (n <= 1 || bytes <= 0) return 0;
  if (algorithm == Algorithm::kHierarchical) {
    const double s = static_cast<double>(bytes);
    const int l = t.workers_per_node, nodes = t.nodes;
    double cpu = 0;
    if (l > 1) cpu += 4.0 * (l - 1) / l * s * links.intra_node.cpu_s_per_byte;
    if (nodes > 1) cpu += 4.0 * (nodes - 1) / nodes * (s / l) * links.inter_node.cpu_s_per_byte;
    return cpu;
  }
  const double moved = 4.0 * (n - 1) / n * static_cast<double>(bytes);
  return moved * busiest_link(t, links).cpu_s_per_byte;
}

}  // namespace chexscale::simulate
