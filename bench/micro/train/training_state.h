// What the train benchmarks time their work on: a model's whole training state after one Adam
// step (weights, buffers, Adam's two moments, the RNG), as a checkpoint holds it; and the median.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "models/registry.h"
#include "train/fused_adam.h"
#include "train/run_checkpoint.h"

namespace chexscale::bench {

inline std::vector<models::NamedTensor> training_state(const std::string& arch) {
  models::ModelOptions mo;
  mo.arch = arch;
  mo.num_classes = 14;
  auto model = models::make_model(mo);
  auto params = model->parameters();
  train::FusedAdam adam(params, torch::optim::AdamOptions(1e-3));
  model->forward(torch::randn({2, 3, 32, 32})).sum().backward();
  adam.step();  // Adam's moments exist, as after training steps
  return train::run_checkpoint_tensors(*model, adam, params);
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace chexscale::bench
