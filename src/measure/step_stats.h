// Statistics of per-step timings for the benchmarks: percentiles, and the phase breakdown of a
// rank's median step.
#pragma once

#include <vector>

#include "common/step_times.h"
#include "report/bench_result.h"

namespace chexscale::measure {

// The q-quantile (0..1) by linear interpolation between order statistics (numpy's default).
// Throws Error on an empty sample.
double quantile(std::vector<double> values, double q);

// Median, p10, p90 (as quantile) and mean. Throws Error on an empty sample.
report::TimeSummary summarise(const std::vector<double>& values);

// The phases of the median step by total time (for an even count, the mean of the two middle
// steps), so the phases are parts of `total` and never add up to more than it.
StepTimes median_step(const std::vector<StepTimes>& steps);

}  // namespace chexscale::measure
