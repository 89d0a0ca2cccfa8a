// The reducer's shared checks; see reducer_defaults.h.
#include "distributed/reducer_defaults.h"

#include <fmt/format.h>

#include <utility>

#include "common/error.h"

namespace chexscale::distributed {

void check_bucket_sizes(double bucket_mb, double first_bucket_mb) {
  for (const auto& [name, mb] :
       {std::pair{"bucket_mb", bucket_mb}, {"first_bucket_mb", first_bucket_mb}}) {
    if (!(mb > 0)) throw UsageError(fmt::format("{} {} must be > 0", name, mb));
  }
}

void check_powersgd_min_rate(double powersgd_min_rate) {
  if (!(powersgd_min_rate >= 0)) {
    throw UsageError(fmt::format("powersgd_min_rate {} must be >= 0", powersgd_min_rate));
  }
}

}  // namespace chexscale::distributed
