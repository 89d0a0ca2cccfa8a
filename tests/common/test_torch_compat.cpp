// torch_compat.h's optimizer state key: LibTorch's own optimizers store a parameter's state under
// it (a string in 1.13, the TensorImpl address in 2.x), so state exported and restored by
// train/optimizer.cpp is the state torch::optim::Adam and SGD step with.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/torch_compat.h"

namespace chexscale {
namespace {

TEST(OptimizerStateKey, FindsTheStateLibTorchsAdamAndSgdCreated) {
  auto a = torch::ones({3}).requires_grad_();
  auto b = torch::ones({2, 2}).requires_grad_();
  torch::optim::Adam adam({a, b}, torch::optim::AdamOptions(1e-2));
  torch::optim::SGD sgd({a, b}, torch::optim::SGDOptions(1e-2).momentum(0.9));
  (a.sum() + b.sum()).backward();
  adam.step();
  sgd.step();
  for (torch::optim::Optimizer* optimizer : {static_cast<torch::optim::Optimizer*>(&adam),
                                             static_cast<torch::optim::Optimizer*>(&sgd)}) {
    ASSERT_EQ(optimizer->state().size(), 2u);
    EXPECT_EQ(optimizer->state().count(compat::optimizer_state_key(a)), 1u);
    EXPECT_EQ(optimizer->state().count(compat::optimizer_state_key(b)), 1u);
  }
  EXPECT_NE(compat::optimizer_state_key(a), compat::optimizer_state_key(b));
}

TEST(OptimizerStateKey, TheOtherVersionsKeyFormIsTheSameParameterAddress) {
  const auto p = torch::zeros({1});
  EXPECT_EQ(compat::optimizer_state_key<void*>(p), static_cast<void*>(p.unsafeGetTensorImpl()));
  std::ostringstream address;
  address << p.unsafeGetTensorImpl();
  EXPECT_EQ(compat::optimizer_state_key<std::string>(p), address.str());
}

}  // namespace
}  // namespace chexscale
