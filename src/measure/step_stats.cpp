// Percentiles and median-step breakdowns (see step_stats.h).
#include "measure/step_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"

namespace chexscale::measure {

double quantile(std::vector<double> values, double q) {
  CHX_CHECK(!values.empty(), "quantile of an empty sample");
  CHX_CHECK(q >= 0.0 && q <= 1.0, "quantile {} outside [0, 1]", q);
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

report::TimeSummary summarise(const std::vector<double>& values) {
  CHX_CHECK(!values.empty(), "summary of an empty sample");
  report::TimeSummary s;
  s.median = quantile(values, 0.5);
  s.p10 = quantile(values, 0.1);
  s.p90 = quantile(values, 0.9);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return s;
}

StepTimes median_step(const std::vector<StepTimes>& steps) {
  CHX_CHECK(!steps.empty(), "median step of no steps");
  std::vector<size_t> order(steps.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return steps[a].total < steps[b].total; });
  const size_t n = steps.size();
  if (n % 2 == 1) return steps[order[n / 2]];
  StepTimes sum = steps[order[n / 2 - 1]];
  sum += steps[order[n / 2]];
  return sum.scaled(0.5);
}

}  // namespace chexscale::measure
