// Bucket assignment for the gradient reducer (see bucket_plan.h).
#include "distributed/bucket_plan.h"

namespace chexscale::distributed {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& parameters,
                                              int64_t first_bucket_bytes, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = parameters.size(); i-- > 0;) {
    const torch::Tensor& p = parameters[i];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    if (!buckets.empty()) {
      const torch::Tensor& head = parameters[buckets.back().front()];
      const int64_t limit = buckets.size() == 1 ? first_bucket_bytes : bucket_bytes;
      if (filled + bytes <= limit && head.scalar_type() == p.scalar_type() &&
          head.device() == p.device()) {
        buckets.back().push_back(i);
        filled += bytes;
        continue;
      }
    }
    buckets.push_back({i});
    filled = bytes;
  }
  return buckets;
}

}  // namespace chexscale::distributed
