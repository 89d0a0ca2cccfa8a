// Channels-last layout: models converted in place give NCHW's logits and training steps; input
// that is not four-dimensional is refused.
#include <gtest/gtest.h>

#include "common/error.h"
#include "models/registry.h"
#include "train/channels_last.h"
#include "train/optimizer.h"
#include "train/random_batch.h"
#include "train/step.h"

namespace chexscale::train {
namespace {

models::Classifier resnet18(uint64_t seed) {
  torch::manual_seed(seed);
  models::ModelOptions o;
  o.arch = "resnet18";
  return models::make_model(o);
}

TEST(ChannelsLast, ConvertsFourDimensionalTensorsInPlace) {
  auto model = resnet18(1);
  const auto params_before = model->parameters();
  const torch::Tensor conv1 = model->named_parameters()["conv1.weight"];
  ASSERT_FALSE(conv1.is_contiguous(torch::MemoryFormat::ChannelsLast));
  convert_to_channels_last(*model);
  EXPECT_TRUE(conv1.is_contiguous(torch::MemoryFormat::ChannelsLast));  // same tensor object
  EXPECT_TRUE(model->named_parameters()["fc.weight"].is_contiguous());  // 2-D: untouched
  EXPECT_EQ(model->parameters().size(), params_before.size());
}

TEST(ChannelsLast, ResNet18LogitsMatchNchw) {
  auto nchw = resnet18(2);
  auto nhwc = resnet18(2);
  convert_to_channels_last(*nhwc);
  nchw->eval();
  nhwc->eval();
  const auto x = torch::randn({2, 3, 64, 64});
  torch::NoGradGuard no_grad;
  const auto expected = nchw->forward(x);
  const auto got = nhwc->forward(to_channels_last(x));
  EXPECT_TRUE(torch::allclose(got, expected, 1e-4, 1e-5))
      << "max difference " << (got - expected).abs().max().item<float>();
}

TEST(ChannelsLast, TrainingStepsMatchNchw) {
  auto nchw = resnet18(3);
  auto nhwc = resnet18(3);
  std::map<std::string, torch::Tensor> initial;
  for (const auto& item : nchw->named_parameters())
    initial[item.key()] = item.value().detach().clone();
  torch::optim::SGD nchw_opt(nchw->parameters(), torch::optim::SGDOptions(0.01));
  torch::optim::SGD nhwc_opt(nhwc->parameters(), torch::optim::SGDOptions(0.01));
  TrainStep nchw_step(nchw, nchw_opt, BceWithLogitsLoss(), nullptr);
  TrainStepOptions o;
  o.channels_last = true;
  TrainStep nhwc_step(nhwc, nhwc_opt, BceWithLogitsLoss(), nullptr, o);
  EXPECT_TRUE(
      nhwc->named_parameters()["conv1.weight"].is_contiguous(torch::MemoryFormat::ChannelsLast));
  for (int i = 0; i < 2; ++i) {
    const auto batch = test_util::random_batch(4, 64, 50 + i);
    EXPECT_NEAR(nhwc_step.run(batch, i).loss, nchw_step.run(batch, i).loss, 1e-4);
  }
  // The layouts sum in different orders, and BatchNorm's backward over few values cancels
  // heavily (relative gradient differences of ~1e-4 in fp32): compare the updates, not bits.
  const auto b = nhwc->named_parameters();
  for (const auto& item : nchw->named_parameters()) {
    const auto expected = item.value() - initial[item.key()];
    const auto got = b[item.key()] - initial[item.key()];
    const double err = (got - expected).norm().item<double>();
    EXPECT_LE(err, 1e-2 * expected.norm().item<double>() + 1e-7) << item.key();
  }
}

TEST(ChannelsLast, RejectsInputThatIsNotFourDimensional) {
  try {
    to_channels_last(torch::zeros({2, 10, 3, 8, 8}));
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("channels_last needs [N, C, H, W] images, got 5"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace chexscale::train
