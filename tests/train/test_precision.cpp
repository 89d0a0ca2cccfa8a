// --amp on CPU: parsing and messages, the autocast scope, and bf16 training steps that run in
// bfloat16 and stay close to fp32 (tiny convnet and a real ResNet-18 with BatchNorm).
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/torch_compat.h"
#include "models/registry.h"
#include "test_util/error_message.h"
#include "train/precision.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

namespace chexscale::train {
namespace {

std::string usage_message(const std::function<void()>& f) {
  return test_util::message_of<UsageError>(f);
}

TEST(AmpMode, ParsesTheThreeModesAndRejectsOthers) {
  EXPECT_EQ(parse_amp_mode("off"), AmpMode::kOff);
  EXPECT_EQ(parse_amp_mode("bf16"), AmpMode::kBf16);
  EXPECT_EQ(parse_amp_mode("fp16"), AmpMode::kFp16);
  for (const AmpMode mode : {AmpMode::kOff, AmpMode::kBf16, AmpMode::kFp16}) {
    EXPECT_EQ(parse_amp_mode(to_string(mode)), mode) << to_string(mode);
  }
  EXPECT_STREQ(to_string(AmpMode::kBf16), "bf16");
  EXPECT_EQ(usage_message([] { parse_amp_mode("fp8"); }), "amp 'fp8': choose off, bf16 or fp16");
}

TEST(AmpMode, Fp16OnCpuIsAUsageErrorWithTheWayOut) {
  const std::string msg =
      usage_message([] { check_amp_supported(AmpMode::kFp16, torch::Device(torch::kCPU)); });
  EXPECT_EQ(msg.rfind("amp fp16 needs a CUDA device", 0), 0u) << msg;
  EXPECT_NE(msg.find("use `amp` bf16 on CPU"), std::string::npos) << msg;
  EXPECT_NO_THROW(check_amp_supported(AmpMode::kBf16, torch::Device(torch::kCPU)));
  EXPECT_NO_THROW(check_amp_supported(AmpMode::kFp16, torch::Device(torch::kCUDA, 0)));
  // The step refuses it before doing anything.
  auto model = test_util::make_tiny_classifier(1);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.1));
  TrainStepOptions o;
  o.amp = AmpMode::kFp16;
  EXPECT_THROW(TrainStep(model, opt, BceWithLogitsLoss(), nullptr, o), UsageError);
}

TEST(AutocastScope, RunsConvolutionsInBf16AndRestoresTheState) {
  const torch::Device cpu(torch::kCPU);
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3));
  const auto x = torch::randn({1, 3, 8, 8});
  const c10::ScalarType dtype_before = compat::autocast_dtype(c10::DeviceType::CPU);
  ASSERT_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  {
    const AutocastScope scope(AmpMode::kBf16, cpu);
    EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));
    EXPECT_EQ(compat::autocast_dtype(c10::DeviceType::CPU), c10::ScalarType::BFloat16);
    EXPECT_EQ(conv->forward(x).scalar_type(), torch::kBFloat16);
    {
      const AutocastScope off(AmpMode::kOff, cpu);  // kOff leaves the outer scope alone
      EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));
    }
  }
  EXPECT_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(compat::autocast_dtype(c10::DeviceType::CPU), dtype_before);
  EXPECT_EQ(conv->forward(x).scalar_type(), torch::kFloat32);
}

// Runs `steps` steps of two copies of a model, fp32 and bf16, on the same batches; returns the
// losses side by side.
std::vector<std::pair<double, double>> fp32_vs_bf16(const std::function<models::Classifier()>& make,
                                                    int steps, int64_t n, int64_t side) {
  auto fp32 = make();
  auto bf16 = make();
  torch::optim::Adam fp32_opt(fp32->parameters(), torch::optim::AdamOptions(1e-3));
  torch::optim::Adam bf16_opt(bf16->parameters(), torch::optim::AdamOptions(1e-3));
  TrainStep fp32_step(fp32, fp32_opt, BceWithLogitsLoss(), nullptr);
  TrainStepOptions o;
  o.amp = AmpMode::kBf16;
  TrainStep bf16_step(bf16, bf16_opt, BceWithLogitsLoss(), nullptr, o);
  std::vector<std::pair<double, double>> losses;
  for (int i = 0; i < steps; ++i) {
    const auto batch = test_util::random_batch(n, side, 40 + i);
    const StepResult a = fp32_step.run(batch, i);
    const StepResult b = bf16_step.run(batch, i);
    EXPECT_FALSE(b.skipped);
    losses.emplace_back(a.loss, b.loss);
  }
  // The weights stay fp32 (autocast casts copies).
  for (const auto& p : bf16->parameters())
    EXPECT_EQ(p.scalar_type(), torch::kFloat32);
  return losses;
}

TEST(Bf16Step, TinyConvnetLossIsCloseToFp32ButNotIdentical) {
  const auto losses = fp32_vs_bf16([] { return test_util::make_tiny_classifier(7); }, 3, 8, 16);
  bool any_difference = false;
  for (const auto& [fp32, bf16] : losses) {
    EXPECT_NEAR(bf16, fp32, 0.02 * fp32);
    any_difference |= bf16 != fp32;
  }
  EXPECT_TRUE(any_difference) << "bf16 losses equal fp32 bit for bit: autocast did not run";
}

TEST(Bf16Step, ResNet18WithBatchNormLossIsCloseToFp32) {
  const auto make = [] {
    torch::manual_seed(8);
    models::ModelOptions o;
    o.arch = "resnet18";
    return models::make_model(o);
  };
  // bfloat16 keeps 8 significant bits; through 18 layers and BatchNorm over 4 images the loss
  // moves by a few percent.
  for (const auto& [fp32, bf16] : fp32_vs_bf16(make, 2, 4, 32))
    EXPECT_NEAR(bf16, fp32, 0.05 * fp32);
}

}  // namespace
}  // namespace chexscale::train
