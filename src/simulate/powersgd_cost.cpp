// PowerSGD's elements and work per bucket (see powersgd_cost.h).
#include "simulate/powersgd_cost.h"

namespace chexscale::simulate {

PowerSgdBucketCost powersgd_bucket_cost(const std::vector<std::vector<int64_t>>& shapes,
                                        const distributed::PowerSgdOptions& options) {
  PowerSgdBucketCost cost;
  for (const std::vector<int64_t>& shape : shapes) {
    int64_t numel = 1;
    for (int64_t s : shape)
      numel *= s;
    const int64_t rank = distributed::powersgd_matrix_rank(shape, options);
    if (rank == 0) {
      cost.first_elements += numel;
      cost.uncompressed_elements += numel;
      continue;
    }
    cost.compressed = true;
    const auto m = static_cast<double>(shape[0]);
    const auto n = static_cast<double>(numel / shape[0]);
    const auto r = static_cast<double>(rank);
    cost.first_elements += shape[0] * rank;
    cost.second_elements += numel / shape[0] * rank;
    // Modified Gram-Schmidt of a (rows, r) matrix: per column a norm and a division, and a dot
    // product and an update against each later column.
    const auto gram_schmidt = [r](double rows) { return 3 * rows * r + 2 * rows * r * (r - 1); };
    cost.first_flops += m * n + 2 * m * n * r;
    cost.second_flops += gram_schmidt(m) + 2 * m * n * r;
    cost.finish_flops += 2 * m * n * r + 2 * m * n + gram_schmidt(n);
  }
  return cost;
}

}  // namespace chexscale::simulate
