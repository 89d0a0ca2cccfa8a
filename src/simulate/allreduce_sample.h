// One measured allreduce size, the unit of a network profile's curve (commbench's rows): shared by
// the profile and its monotone fit.
#pragma once

#include <cstdint>

namespace chexscale::simulate {

// One measured allreduce size: bytes and mean seconds (commbench's rows).
struct AllreduceSample {
  int64_t bytes = 0;
  double seconds = 0;
};

}  // namespace chexscale::simulate
