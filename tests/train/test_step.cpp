// TrainStep on one worker: the same update as a hand-written step, learning, timing, NaN policy,
// and the warm-up pass that changes no weight.
#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "models/registry.h"
#include "test_util/error_message.h"
#include "train/loss_scaler.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

namespace chexscale::train {
namespace {

data::Batch make_batch(int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  data::Batch b;
  b.images = torch::randn({n, 3, 16, 16});
  b.labels = (torch::rand({n, models::kChestXray14Classes}) < 0.3).to(torch::kFloat32);
  for (int64_t i = 0; i < n; ++i)
    b.indices.push_back(i);
  return b;
}

torch::optim::Adam make_adam(const models::Classifier& m) {
  return torch::optim::Adam(m->parameters(), torch::optim::AdamOptions(1e-2));
}

TEST(NonFinitePolicy, EveryNameRoundTripsAndABadOneListsTheValidOnes) {
  for (const NonFinitePolicy policy :
       {NonFinitePolicy::kStop, NonFinitePolicy::kSkip, NonFinitePolicy::kIgnore}) {
    EXPECT_EQ(parse_non_finite_policy(to_string(policy)), policy) << to_string(policy);
  }
  EXPECT_STREQ(to_string(NonFinitePolicy::kSkip), "skip");
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_non_finite_policy("retry"); }),
            "non_finite 'retry': choose stop, skip or ignore");
}

TEST(TrainStepOptions, RefusesFp16OnTheCpuAndABadLossScalerNamingTheField) {
  TrainStepOptions o;
  EXPECT_NO_THROW(o.validate());
  o.amp = AmpMode::kFp16;
  std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
  EXPECT_EQ(message.rfind("amp fp16 ", 0), 0u) << message;
  o = TrainStepOptions{};
  o.loss_scaler.backoff_factor = 2;
  message = test_util::message_of<UsageError>([&] { o.validate(); });
  EXPECT_EQ(message.rfind("backoff_factor ", 0), 0u) << message;
}

// Every parameter of `model` holds the bytes of `reference`'s.
void expect_same_parameters(torch::nn::Module& model, torch::nn::Module& reference) {
  const auto params = model.parameters();
  const auto ref_params = reference.parameters();
  ASSERT_EQ(params.size(), ref_params.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(params[i], ref_params[i]));
}

// A batch of one 32 px image shrinks to 1x1 features in ResNet-18: BatchNorm refuses to train on
// it, and the step says so in the user's terms (batch size, image size), not LibTorch's.
TEST(TrainStep, ABatchOfOneSmallImageIsAUsageErrorNamingTheBatchAndImageSize) {
  torch::manual_seed(1);
  models::ModelOptions o;
  o.arch = "resnet18";
  auto model = models::make_model(o);
  auto opt = make_adam(model);
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr);
  const std::string message =
      test_util::message_of<UsageError>([&] { step.run(test_util::random_batch(1, 32, 3), 0); });
  EXPECT_EQ(message.rfind("a training batch of 1 image(s) of 32x32 px leaves BatchNorm one", 0), 0u)
      << message;
  EXPECT_NE(message.find("--batch-size"), std::string::npos) << message;
  // Two images of the same size train.
  EXPECT_FALSE(step.run(test_util::random_batch(2, 32, 4), 1).skipped);
}

TEST(TrainStep, SameUpdateAsAHandWrittenStep) {
  auto model = test_util::make_tiny_classifier(1);
  auto reference = test_util::make_tiny_classifier(1);
  auto opt = make_adam(model);
  auto ref_opt = make_adam(reference);
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr);
  for (int i = 0; i < 3; ++i) {
    const auto batch = make_batch(4, 10 + i);
    const StepResult r = step.run(batch, i);
    ref_opt.zero_grad();
    const auto loss =
        torch::binary_cross_entropy_with_logits(reference->forward(batch.images), batch.labels);
    loss.backward();
    ref_opt.step();
    EXPECT_DOUBLE_EQ(r.loss, loss.item<double>());
    EXPECT_EQ(r.images, 4);
    EXPECT_FALSE(r.skipped);
  }
  expect_same_parameters(*model, *reference);
}

// A warm-up pass (a newcomer in standby) updates nothing: the weights and the optimizer state are
// untouched and no gradient is left; the steps after it are those of a model never warmed.
TEST(TrainStep, AWarmUpChangesNoWeightAndLeavesNoGradient) {
  auto model = test_util::make_tiny_classifier(1);
  auto reference = test_util::make_tiny_classifier(1);
  auto opt = make_adam(model);
  auto ref_opt = make_adam(reference);
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr);
  TrainStep ref_step(reference, ref_opt, BceWithLogitsLoss(), nullptr);
  step.warm_up(make_batch(4, 3));
  EXPECT_TRUE(opt.state().empty());
  for (const torch::Tensor& p : model->parameters())
    EXPECT_FALSE(p.grad().defined());
  expect_same_parameters(*model, *reference);
  for (int i = 0; i < 2; ++i) {
    const auto batch = make_batch(4, 20 + i);
    EXPECT_DOUBLE_EQ(step.run(batch, i).loss, ref_step.run(batch, i).loss);
  }
  expect_same_parameters(*model, *reference);
}

TEST(TrainStep, LossFallsWhenFittingOneBatch) {
  auto model = test_util::make_tiny_classifier(2);
  auto opt = make_adam(model);
  TrainStep step(model, opt,
                 BceWithLogitsLoss(class_weights_from_counts(
                     std::vector<int64_t>(models::kChestXray14Classes, 3),
                     std::vector<int64_t>(models::kChestXray14Classes, 8))),
                 nullptr);
  const auto batch = make_batch(8, 3);
  const double first = step.run(batch, 0).loss;
  double last = first;
  for (int i = 1; i < 40; ++i)
    last = step.run(batch, i).loss;
  EXPECT_LT(last, 0.8 * first);
}

TEST(TrainStep, TimesArePositiveAndAddUp) {
  auto model = test_util::make_tiny_classifier(3);
  auto opt = make_adam(model);
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr);
  const StepResult r = step.run(make_batch(4, 4), 0);
  EXPECT_GT(r.times.forward, 0);
  EXPECT_GT(r.times.backward, 0);
  EXPECT_GT(r.times.optimizer, 0);
  EXPECT_EQ(r.times.comm_exposed, 0);  // no reducer
  EXPECT_EQ(r.times.data_wait, 0);     // the caller's to fill
  EXPECT_GE(r.times.total, r.times.forward + r.times.backward + r.times.optimizer);
}

data::Batch nan_batch() {
  auto b = make_batch(4, 5);
  b.images[1][0][3][3] = std::numeric_limits<float>::quiet_NaN();
  return b;
}

TEST(TrainStep, NonFiniteLossStopsNamingTheStep) {
  auto model = test_util::make_tiny_classifier(4);
  auto opt = make_adam(model);
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr);
  try {
    step.run(nan_batch(), 17);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step 17"), std::string::npos) << e.what();
  }
}

TEST(TrainStep, NonFiniteStepIsSkippedWhenAsked) {
  auto model = test_util::make_tiny_classifier(5);
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters())
    before.push_back(p.detach().clone());
  auto opt = make_adam(model);
  TrainStepOptions options;
  options.non_finite = NonFinitePolicy::kSkip;
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr, options);
  const StepResult r = step.run(nan_batch(), 0);
  EXPECT_TRUE(r.skipped);
  const auto after = model->parameters();
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i], after[i]));
  EXPECT_FALSE(step.run(make_batch(4, 6), 1).skipped);  // and training carries on
}

// Loss scaling on CPU (fp32 autocast-free, so the arithmetic is checkable).
data::Batch small_batch(uint64_t seed) {
  return test_util::random_batch(4, 16, seed);
}

// A power-of-two scale is exact in binary floating point: the scaled step must make the very
// same update as the unscaled one.
// A power-of-two scale is exact in binary floating point: the scaled step must make the very
// same update as the unscaled one.
TEST(TrainStepLossScaling, PowerOfTwoScaleGivesTheUnscaledUpdate) {
  auto plain = test_util::make_tiny_classifier(5);
  auto scaled = test_util::make_tiny_classifier(5);
  torch::optim::SGD plain_opt(plain->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::SGD scaled_opt(scaled->parameters(), torch::optim::SGDOptions(0.1));
  TrainStep plain_step(plain, plain_opt, BceWithLogitsLoss(), nullptr);
  TrainStepOptions o;
  o.loss_scaling = true;
  o.loss_scaler.init_scale = 1024.0;
  TrainStep scaled_step(scaled, scaled_opt, BceWithLogitsLoss(), nullptr, o);
  for (int i = 0; i < 3; ++i) {
    const auto batch = small_batch(20 + i);
    const StepResult a = plain_step.run(batch, i);
    const StepResult b = scaled_step.run(batch, i);
    EXPECT_EQ(a.loss, b.loss);  // the reported loss is the unscaled one
    EXPECT_FALSE(b.skipped);
  }
  const auto p = plain->parameters();
  const auto q = scaled->parameters();
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_TRUE(torch::equal(p[i], q[i])) << "parameter " << i;
  EXPECT_EQ(scaled_step.loss_scaler()->current_scale(), 1024.0);
  EXPECT_EQ(scaled_step.loss_scaler()->state().good_steps, 3);
}
// A scale that overflows the (fp32) scaled loss: the step is skipped, not an error, even under
// the stop policy, and the scale backs off.
TEST(TrainStepLossScaling, OverflowSkipsTheStepAndBacksOff) {
  auto model = test_util::make_tiny_classifier(6);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  TrainStepOptions o;
  o.non_finite = NonFinitePolicy::kStop;
  o.loss_scaling = true;
  o.loss_scaler.init_scale = 1e39;  // above float's max: loss * scale = inf
  TrainStep step(model, opt, BceWithLogitsLoss(), nullptr, o);
  std::vector<torch::Tensor> before;
  for (const auto& p : model->parameters())
    before.push_back(p.detach().clone());
  const StepResult r = step.run(small_batch(30), 0);
  EXPECT_TRUE(r.skipped);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(step.loss_scaler()->current_scale(), 5e38);
  const auto after = model->parameters();
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_TRUE(torch::equal(before[i], after[i])) << "parameter " << i;
  // Each further overflow halves the scale again until the scaled gradients fit in fp32;
  // then the step updates the weights.
  int skipped = 1;
  StepResult later;
  for (int i = 1; i < 200; ++i) {
    later = step.run(small_batch(30), i);
    if (!later.skipped) break;
    ++skipped;
  }
  ASSERT_FALSE(later.skipped);
  EXPECT_DOUBLE_EQ(step.loss_scaler()->current_scale(), 1e39 * std::pow(0.5, skipped));
  EXPECT_FALSE(torch::equal(before[0], model->parameters()[0]));
}

}  // namespace
}  // namespace chexscale::train
