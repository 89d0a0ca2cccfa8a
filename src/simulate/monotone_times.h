// The allreduce time curve a network profile is fitted to: the median measured time of each size,
// made non-decreasing in size by isotonic regression (pool-adjacent-violators), so that a size
// measured faster than a smaller one (a busy host slowed the smaller one down) is pooled with its
// neighbours instead of bending the fit, and named as distrusted.
#pragma once

#include <cstdint>
#include <vector>

namespace chexscale::simulate {

// One measured allreduce: bytes and seconds (a commbench row, or one round of it).
struct AllreduceSample {
  int64_t bytes = 0;
  double seconds = 0;
};

// The median seconds of each distinct size, by increasing size (the mean of the middle two for
// an even count).
std::vector<AllreduceSample> median_per_size(const std::vector<AllreduceSample>& samples);

struct MonotoneTimes {
  // One entry per size of the medians, the same sizes, seconds non-decreasing in size: the
  // least-squares non-decreasing curve (each pooled run of sizes gets its mean time).
  std::vector<AllreduceSample> fitted;
  // The medians (as measured) of the sizes that were pooled: out of order with a neighbour.
  std::vector<AllreduceSample> distrusted;
};

// The isotonic fit of `medians` (by increasing size, as median_per_size returns them).
MonotoneTimes monotone_times(const std::vector<AllreduceSample>& medians);

}  // namespace chexscale::simulate
