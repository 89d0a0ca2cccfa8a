// Bucket assignment for the gradient reducer (see bucket_plan.h).
#include "distributed/bucket_plan.h"

#include <algorithm>
#include <utility>

namespace chexscale::distributed {

std::vector<std::vector<size_t>> plan_buckets_by_size(const std::vector<int64_t>& bytes,
                                                      const std::vector<int>& kind,
                                                      int64_t first_bucket_bytes,
                                                      int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = bytes.size(); i-- > 0;) {
    if (!buckets.empty()) {
      const int64_t limit = buckets.size() == 1 ? first_bucket_bytes : bucket_bytes;
      if (filled + bytes[i] <= limit && kind[buckets.back().front()] == kind[i]) {
        buckets.back().push_back(i);
        filled += bytes[i];
        continue;
      }
    }
    buckets.push_back({i});
    filled = bytes[i];
  }
  return buckets;
}

std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& parameters,
                                              int64_t first_bucket_bytes, int64_t bucket_bytes) {
  std::vector<int64_t> bytes;
  std::vector<int> kind;
  std::vector<std::pair<torch::ScalarType, torch::Device>> kinds;
  for (const torch::Tensor& p : parameters) {
    bytes.push_back(p.numel() * static_cast<int64_t>(p.element_size()));
    const std::pair<torch::ScalarType, torch::Device> k{p.scalar_type(), p.device()};
    auto it = std::find(kinds.begin(), kinds.end(), k);
    if (it == kinds.end()) it = kinds.insert(kinds.end(), k);
    kind.push_back(static_cast<int>(it - kinds.begin()));
  }
  return plan_buckets_by_size(bytes, kind, first_bucket_bytes, bucket_bytes);
}

}  // namespace chexscale::distributed
