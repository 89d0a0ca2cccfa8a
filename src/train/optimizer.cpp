// Adam/SGD construction and state export/import (see optimizer.h).
#include "train/optimizer.h"

#include <cmath>
#include <map>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/torch_compat.h"
#include "train/fused_adam.h"

namespace chexscale::train {
namespace {

std::string tensor_name(size_t index, const char* field) {
  return fmt::format("optimizer.{}.{}", index, field);
}

bool is_adam(torch::optim::Optimizer& optimizer) {
  return dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
}

}  // namespace

const char* to_string(OptimizerKind kind) {
  return kind == OptimizerKind::kSgd ? "sgd" : "adam";
}

OptimizerKind parse_optimizer_kind(std::string_view name) {
  return parse_enum(name, "optimizer", {OptimizerKind::kAdam, OptimizerKind::kSgd});
}

void OptimizerOptions::validate() const {
  // Written so that NaN fails every check (`!(x >= 0)` is true for NaN).
  if (!(lr > 0) || std::isinf(lr)) {
    throw UsageError(fmt::format("lr {} must be a positive number", lr));
  }
  for (const auto& [field, beta] : {std::pair{"beta1", beta1}, {"beta2", beta2}}) {
    if (!(beta >= 0 && beta < 1)) {
      throw UsageError(fmt::format("{} {} is not in [0, 1)", field, beta));
    }
  }
  for (const auto& [field, value] :
       {std::pair{"momentum", momentum}, {"weight_decay", weight_decay}}) {
    if (!(value >= 0) || std::isinf(value)) {
      throw UsageError(fmt::format("{} {} must be a number >= 0", field, value));
    }
  }
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const OptimizerOptions& options) {
  options.validate();
  if (options.kind == OptimizerKind::kSgd) {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(options.lr)
                                                           .momentum(options.momentum)
                                                           .weight_decay(options.weight_decay));
  }
  return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(options.lr)
                                                 .betas({options.beta1, options.beta2})
                                                 .weight_decay(options.weight_decay));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups())
    group.options().set_lr(lr);
}

std::vector<models::NamedTensor> optimizer_state(torch::optim::Optimizer& optimizer,
                                                 const std::vector<torch::Tensor>& params) {
  std::vector<models::NamedTensor> out;
  auto& states = optimizer.state();
  const bool adam = is_adam(optimizer);
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = states.find(compat::optimizer_state_key(params[i]));
    if (it == states.end()) continue;
    if (adam) {
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      out.push_back({tensor_name(i, "step"), torch::tensor({s.step()}, torch::kInt64)});
      out.push_back({tensor_name(i, "exp_avg"), s.exp_avg().cpu()});
      out.push_back({tensor_name(i, "exp_avg_sq"), s.exp_avg_sq().cpu()});
    } else {
      const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
      out.push_back({tensor_name(i, "momentum_buffer"), s.momentum_buffer().cpu()});
    }
  }
  return out;
}

void load_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::vector<torch::Tensor>& params,
                          const std::vector<models::NamedTensor>& tensors) {
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& t : tensors)
    by_name[t.name] = t.tensor;
  const auto take = [&](size_t i, const char* field, const torch::Tensor& like) {
    const auto it = by_name.find(tensor_name(i, field));
    if (it == by_name.end()) throw DataError("checkpoint lacks " + tensor_name(i, field));
    if (like.defined() && it->second.sizes() != like.sizes()) {
      throw DataError(fmt::format("checkpoint {}: shape {} does not match the parameter's {}",
                                  tensor_name(i, field), c10::str(it->second.sizes()),
                                  c10::str(like.sizes())));
    }
    return like.defined() ? it->second.to(like.device(), like.scalar_type()) : it->second;
  };
  auto& states = optimizer.state();
  states.clear();
  const bool adam = is_adam(optimizer);
  for (size_t i = 0; i < params.size(); ++i) {
    const char* probe = adam ? "step" : "momentum_buffer";
    if (by_name.count(tensor_name(i, probe)) == 0) continue;  // no state yet for this parameter
    if (adam) {
      auto s = std::make_unique<torch::optim::AdamParamState>();
      s->step(take(i, "step", torch::Tensor()).item<int64_t>());
      s->exp_avg(take(i, "exp_avg", params[i]).clone());
      s->exp_avg_sq(take(i, "exp_avg_sq", params[i]).clone());
      states[compat::optimizer_state_key(params[i])] = std::move(s);
    } else {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(take(i, "momentum_buffer", params[i]).clone());
      states[compat::optimizer_state_key(params[i])] = std::move(s);
    }
  }
}

}  // namespace chexscale::train
