// The gradient reducer's defaults and the checks of its sizes and rates, stated once for the
// reducer (reducer.h) and for the simulator that replays it (simulate/step_simulator.h).
#pragma once

#include <cstdint>

namespace chexscale::distributed {

// DDP's bucket sizes (c10d's kDefaultBucketBytesCap and kDefaultFirstBucketBytes).
inline constexpr double kDefaultBucketMb = 25.0;
inline constexpr double kDefaultFirstBucketMb = 1.0;

// PowerSGD's defaults (DDP's powerSGD_hook: start step 10, minimum compression rate 2).
inline constexpr int kDefaultPowerSgdRank = 4;
inline constexpr int64_t kDefaultPowerSgdStartStep = 10;
inline constexpr double kDefaultPowerSgdMinRate = 2.0;

// UsageError "bucket_mb X must be > 0" (or first_bucket_mb) unless both are > 0 (NaN is not).
void check_bucket_sizes(double bucket_mb, double first_bucket_mb);

// UsageError "powersgd_min_rate X must be >= 0" unless it is.
void check_powersgd_min_rate(double powersgd_min_rate);

}  // namespace chexscale::distributed
