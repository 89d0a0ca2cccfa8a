// Where tensors live and how they are laid out: channels-last models give NCHW's logits and
// training steps, and checkpoints load into a model wherever (and however) its tensors live.
#include <gtest/gtest.h>

#include <map>

#include "common/error.h"
#include "models/registry.h"
#include "models/weights.h"
#include "test_util/temp_dir.h"
#include "train/channels_last.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

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
    EXPECT_NE(std::string(e.what()).find("--channels-last needs [N, C, H, W] images, got 5"),
              std::string::npos)
        << e.what();
  }
}

// What the trainer writes: the model's state dict and the optimizer state.
std::vector<models::NamedTensor> checkpoint_tensors(const models::Classifier& model,
                                                    torch::optim::Optimizer& opt) {
  std::vector<models::NamedTensor> tensors;
  for (const auto& t : models::state_dict(*model))
    tensors.push_back({"model." + t.name, t.tensor});
  for (auto& t : optimizer_state(opt, model->parameters()))
    tensors.push_back(std::move(t));
  return tensors;
}

// A checkpoint saved from a channels-last model loads into a fresh NCHW model with identical
// values: the loader copies into the model's own tensors (their device and layout), it does not
// replace them with the file's CPU tensors.
TEST(CrossDeviceCheckpoint, LoadsIntoTheTargetModelsOwnTensors) {
  test_util::TempDir dir;
  auto saved = test_util::make_tiny_classifier(4);
  torch::optim::Adam saved_opt(saved->parameters(), torch::optim::AdamOptions(1e-2));
  TrainStepOptions o;
  o.channels_last = true;
  TrainStep step(saved, saved_opt, BceWithLogitsLoss(), nullptr, o);
  for (int i = 0; i < 2; ++i)
    step.run(test_util::random_batch(4, 16, 60 + i), i);
  CheckpointStore store(dir.path(), 1);
  const Checkpoint ckpt = read_checkpoint(store.save(2, {}, checkpoint_tensors(saved, saved_opt)));

  auto loaded = test_util::make_tiny_classifier(5);
  torch::optim::Adam loaded_opt(loaded->parameters(), torch::optim::AdamOptions(1e-2));
  const auto params = loaded->parameters();
  std::vector<const void*> storage_before;
  for (const auto& p : params)
    storage_before.push_back(p.data_ptr());
  models::load_state_dict(*loaded, tensors_with_prefix(ckpt.tensors, "model."),
                          {/*replace_head=*/false});
  load_optimizer_state(loaded_opt, params, ckpt.tensors);

  const auto saved_params = saved->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i], saved_params[i])) << "parameter " << i;
    EXPECT_EQ(params[i].data_ptr(), storage_before[i]) << "parameter " << i << " was replaced";
    EXPECT_TRUE(params[i].is_contiguous()) << "parameter " << i << " took the file's layout";
  }
  // One more identical step on each: the optimizer state came across too.
  TrainStep loaded_step(loaded, loaded_opt, BceWithLogitsLoss(), nullptr);
  const auto batch = test_util::random_batch(4, 16, 70);
  EXPECT_NEAR(loaded_step.run(batch, 2).loss, step.run(batch, 2).loss, 1e-5);
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i], saved_params[i], 1e-5, 1e-6)) << "parameter " << i;
}

// The optimizer state follows the parameters' device, whatever it is: on the meta device (no
// data, but a device that is not the CPU) every restored state tensor must be a meta tensor.
TEST(CrossDeviceCheckpoint, OptimizerStateMovesToTheParametersDevice) {
  auto saved = test_util::make_tiny_classifier(6);
  torch::optim::Adam saved_opt(saved->parameters(), torch::optim::AdamOptions(1e-2));
  TrainStep(saved, saved_opt, BceWithLogitsLoss(), nullptr)
      .run(test_util::random_batch(2, 16, 80), 0);
  const auto tensors = checkpoint_tensors(saved, saved_opt);

  std::vector<torch::Tensor> elsewhere;
  for (const auto& p : saved->parameters())
    elsewhere.push_back(torch::empty(p.sizes(), torch::Device(torch::kMeta)).requires_grad_(true));
  torch::optim::Adam opt(elsewhere, torch::optim::AdamOptions(1e-2));
  load_optimizer_state(opt, elsewhere, tensors);
  ASSERT_EQ(opt.state().size(), elsewhere.size());
  for (const auto& [key, state] : opt.state()) {
    const auto& adam = static_cast<const torch::optim::AdamParamState&>(*state);
    EXPECT_TRUE(adam.exp_avg().is_meta());
    EXPECT_TRUE(adam.exp_avg_sq().is_meta());
  }
}

}  // namespace
}  // namespace chexscale::train
