// Gap % and scaling efficiency; see throughput_ratios.h.
#include "report/throughput_ratios.h"

#include "common/error.h"

namespace chexscale::report {

double gap_percent(double reference_images_per_sec, double images_per_sec) {
  CHX_CHECK(reference_images_per_sec > 0, "reference throughput {}", reference_images_per_sec);
  return 100.0 * (reference_images_per_sec - images_per_sec) / reference_images_per_sec;
}

double scaling_efficiency(double images_per_sec_n, int workers, double images_per_sec_n0,
                          int workers_n0) {
  CHX_CHECK(workers > 0 && workers_n0 > 0 && images_per_sec_n0 > 0, "workers {}/{} T(N0) {}",
            workers, workers_n0, images_per_sec_n0);
  return images_per_sec_n * workers_n0 / (workers * images_per_sec_n0);
}

}  // namespace chexscale::report
