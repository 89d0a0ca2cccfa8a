// Statistics of per-step timings for the benchmarks: percentiles, and the phase breakdown of a
// rank's median step.
#pragma once

#include <vector>

#include "common/step_times.h"

namespace chexscale::bench {

struct TimeSummary {
  double median = 0;
  double p10 = 0;
  double p90 = 0;
  double mean = 0;
};

// The q-quantile (0..1) by linear interpolation between order statistics (numpy's default).
// Throws Error on an empty sample.
double quantile(std::vector<double> values, double q);

TimeSummary summarise(const std::vector<double>& values);

// Every phase of `t` divided by `by` (means of sums).
StepTimes divided(StepTimes t, double by);

// The phases of the median step by total time (for an even count, the mean of the two middle
// steps), so the phases are parts of `total` and never add up to more than it.
StepTimes median_step(const std::vector<StepTimes>& steps);

}  // namespace chexscale::bench
