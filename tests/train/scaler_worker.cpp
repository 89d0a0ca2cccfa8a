// A worker of test_loss_scaler_ranks: one rank of a real 2-rank job (torchrun's environment)
// training TinyClassifier through TrainStep with dynamic loss scaling and the gradient reducer.
// Rank 0's images are scaled by 1e12, so at the first loss scales its scaled gradients overflow
// while rank 1's alone would not: the ranks must still take the same skip decisions.
//   scaler_worker DIR STEPS   writes DIR/rank<R>.json (per-step results, whether this rank's own
//                             scaled gradients overflow at the initial scale) and DIR/rank<R>.pt
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "distributed/context.h"
#include "distributed/reducer.h"
#include "test_util/worker_main.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

namespace {

using namespace chexscale;

constexpr double kInitScale = 0x1p100;
constexpr double kRank0ImageFactor = 1e12;

data::Batch rank_batch(int rank, int step) {
  data::Batch b = test_util::random_batch(4, 16, 1000 * step + rank);
  if (rank == 0) b.images.mul_(kRank0ImageFactor);
  for (int64_t i = 0; i < 4; ++i)
    b.indices.push_back(i);
  return b;
}

// Whether this rank's own gradients of its first batch, times the initial scale, are finite.
bool local_scaled_gradients_finite(int rank) {
  auto probe = test_util::make_tiny_classifier(7);
  const data::Batch b = rank_batch(rank, 0);
  const auto loss = torch::binary_cross_entropy_with_logits(probe->forward(b.images), b.labels);
  (loss * kInitScale).backward();
  for (const auto& p : probe->parameters()) {
    if (!torch::isfinite(p.grad()).all().item<bool>()) return false;
  }
  return true;
}

int run(int argc, char** argv) {
  if (argc != 3) throw UsageError("usage: scaler_worker DIR STEPS");
  const std::string dir = argv[1];
  const int steps = std::atoi(argv[2]);
  distributed::DistOptions options;
  options.collective_timeout = std::chrono::seconds(60);
  options.rdzv_timeout = std::chrono::seconds(60);
  auto ctx = distributed::DistContext::init(options);
  const int rank = ctx->rank();

  auto model = test_util::make_tiny_classifier(7);
  distributed::broadcast_module(*ctx, *model);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-3));
  distributed::GradientReducer reducer(ctx, model->parameters(), distributed::ReducerOptions{});
  train::TrainStepOptions step_options;
  step_options.loss_scaling = true;
  step_options.loss_scaler.init_scale = kInitScale;
  step_options.loss_scaler.backoff_factor = 0x1p-8;  // recover within a few steps
  train::TrainStep step(model, optimizer, train::BceWithLogitsLoss(), &reducer, step_options);

  nlohmann::json out;
  out["local_overflow_at_init"] = !local_scaled_gradients_finite(rank);
  for (int s = 0; s < steps; ++s) {
    const double scale_before = step.loss_scaler()->current_scale();
    const train::StepResult r = step.run(rank_batch(rank, s), s);
    out["steps"].push_back({{"skipped", r.skipped},
                            {"scale_before", scale_before},
                            {"loss_finite", std::isfinite(r.loss)}});
  }
  out["final_scale"] = step.loss_scaler()->current_scale();
  write_file_atomic(fmt::format("{}/rank{}.json", dir, rank), out.dump(2));
  std::vector<torch::Tensor> params;
  for (const auto& p : model->parameters())
    params.push_back(p.detach().clone());
  torch::save(params, fmt::format("{}/rank{}.pt", dir, rank));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return chexscale::test_util::worker_main("scaler_worker", run, argc, argv);
}
