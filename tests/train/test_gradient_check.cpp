// gradients_finite: any inf or NaN in any defined gradient makes the step's gradients non-finite.
#include <gtest/gtest.h>

#include <limits>

#include "train/gradient_check.h"

namespace chexscale::train {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

torch::Tensor param_with_grad(const torch::Tensor& grad) {
  auto p = torch::zeros_like(grad).requires_grad_(true);
  p.mutable_grad() = grad;
  return p;
}

// Three parameters of different shapes, all gradients finite (mixed signs, zeros, large values
// whose squares still fit in float).
std::vector<torch::Tensor> finite_params() {
  return {param_with_grad(torch::tensor({-1.5f, 0.0f, 2.0f})),
          param_with_grad(torch::full({4, 5}, 1e18f)),
          param_with_grad(torch::arange(24, torch::kFloat32).reshape({2, 3, 2, 2}) - 12)};
}

TEST(GradientsFinite, FiniteGradientsPass) {
  EXPECT_TRUE(gradients_finite(finite_params()));
}

TEST(GradientsFinite, OneBadElementAnywhereFails) {
  struct Case {
    size_t param;
    int64_t element;
    float value;
  };
  for (const Case& c : {Case{0, 0, kInf}, Case{1, 19, kNaN}, Case{2, 23, -kInf}, Case{1, 7, kInf},
                        Case{2, 0, kNaN}}) {
    auto params = finite_params();
    params[c.param].mutable_grad().view({-1})[c.element] = c.value;
    EXPECT_FALSE(gradients_finite(params))
        << "parameter " << c.param << " element " << c.element << " = " << c.value;
  }
}

// The documented limit: a gradient whose L2 norm overflows float counts as non-finite.
TEST(GradientsFinite, GradientWithAnOverflowingNormFails) {
  auto params = finite_params();
  params[0].mutable_grad()[1] = 1e20f;
  EXPECT_FALSE(gradients_finite(params));
}

TEST(GradientsFinite, ChannelsLastGradientIsChecked) {
  auto grad = torch::ones({2, 3, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast);
  grad[1][2][3][0] = kNaN;
  EXPECT_FALSE(gradients_finite({param_with_grad(grad)}));
}

TEST(GradientsFinite, ParametersWithoutGradientsAreIgnored) {
  const auto no_grad = torch::zeros({3}).requires_grad_(true);
  EXPECT_TRUE(gradients_finite({}));
  EXPECT_TRUE(gradients_finite({no_grad}));
  EXPECT_TRUE(gradients_finite({no_grad, param_with_grad(torch::ones({2}))}));
  EXPECT_FALSE(gradients_finite({no_grad, param_with_grad(torch::tensor({1.0f, kInf}))}));
}

}  // namespace
}  // namespace chexscale::train
