// Metric averaging across ranks (see metrics.h).
#include "distributed/metrics.h"

namespace chexscale::distributed {

std::vector<double> average_across_ranks(DistContext& ctx, const std::vector<double>& values) {
  if (ctx.world_size() == 1 || values.empty()) return values;
  std::vector<torch::Tensor> sums{torch::tensor(values, torch::kFloat64)};
  ctx.allreduce_sum_(sums);
  sums[0].div_(ctx.world_size());
  return {sums[0].data_ptr<double>(), sums[0].data_ptr<double>() + values.size()};
}

double average_across_ranks(DistContext& ctx, double value) {
  return average_across_ranks(ctx, std::vector<double>{value}).front();
}

}  // namespace chexscale::distributed
