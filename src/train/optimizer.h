// The optimizers of the recipe (Adam, as CheXNet; SGD with momentum as an option), their learning
// rate, and their state (Adam moments, step counts, SGD momentum) as named tensors for checkpoints.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "models/safetensors.h"

namespace chexscale::train {

enum class OptimizerKind {
  kAdam,  // CheXNet's optimizer (FusedAdam)
  kSgd    // SGD with momentum
};

const char* to_string(OptimizerKind kind);
// "adam" | "sgd"; UsageError naming `optimizer` for anything else.
OptimizerKind parse_optimizer_kind(std::string_view name);

// CheXNet's learning rate (Adam, one GPU).
inline constexpr double kDefaultLearningRate = 1e-3;

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdam;
  double lr = kDefaultLearningRate;
  double beta1 = 0.9;  // Adam
  double beta2 = 0.999;
  double momentum = 0.9;  // SGD
  double weight_decay = 0;

  // UsageError naming the field of the first value out of range (NaN and infinity included),
  // before LibTorch sees it.
  void validate() const;
};

// The optimizer of `options` (validated) over `params`.

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const OptimizerOptions& options);

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// The per-parameter state as "optimizer.<param index>.<field>" tensors (CPU copies), parameters
// indexed in `params` order (the model's parameters()).
std::vector<models::NamedTensor> optimizer_state(torch::optim::Optimizer& optimizer,
                                                 const std::vector<torch::Tensor>& params);

// Restores state written by optimizer_state(); DataError when a tensor is missing or misshapen.
void load_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::vector<torch::Tensor>& params,
                          const std::vector<models::NamedTensor>& tensors);

}  // namespace chexscale::train
