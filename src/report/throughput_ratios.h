// Two ratios of throughputs that reports and the simulator share: the gap of a system to its
// reference in %, and the scaling efficiency of a worker count against a set's smallest.
#pragma once

namespace chexscale::report {

// gap % = 100 x (reference images/s - this images/s) / reference images/s: the share of the
// reference's throughput this system loses (positive: slower than the reference).
double gap_percent(double reference_images_per_sec, double images_per_sec);

// Scaling efficiency T(N) x N0 / (N x T(N0)) against the smallest worker count N0 of a set:
// T(N) / (N x T(1)) when the set has a 1-worker run (as sweep.json computes it).
double scaling_efficiency(double images_per_sec_n, int workers, double images_per_sec_n0,
                          int workers_n0);

}  // namespace chexscale::report
