// Checkpoints: exact round trip (model, Adam state), damaged/truncated newest skipped with a
// warning, keep-last pruning that never loses the newest good checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "models/weights.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"
#include "train/checkpoint.h"
#include "train/inference.h"
#include "train/optimizer.h"
#include "train/random_batch.h"
#include "train/step.h"
#include "train/tiny_classifier.h"

namespace chexscale::train {
namespace {

namespace fs = std::filesystem;

std::vector<models::NamedTensor> some_tensors(float value) {
  return {{"model.w", torch::full({3, 4}, value)}, {"optimizer.0.step", torch::tensor({7L})}};
}

float first_value(const Checkpoint& c) {
  return c.tensors.at(0).tensor[0][0].item<float>();
}

TEST(Checkpoint, RoundTripsStateAndTensors) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 3);
  const std::string path = store.save(12, {{"epoch", 2}}, some_tensors(1.5f));
  const Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(c.state.at("epoch").get<int>(), 2);
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_TRUE(torch::equal(c.tensors[0].tensor, torch::full({3, 4}, 1.5f)));
  EXPECT_EQ(tensors_with_prefix(c.tensors, "optimizer.").at(0).name, "0.step");
}

// A manifest whose image size would make eval/predict resize to gigabytes per image (a damaged or
// hand-edited one) is refused with its path, before any model is built.
TEST(Checkpoint, ImplausibleImageSizeIsRefusedByInference) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 1);
  const nlohmann::json state = {
      {"model", {{"arch", "resnet18"}, {"num_classes", 14}, {"dropout", 0.0}}},
      {"data", {{"image_size", 100000}, {"crop_size", 224}}}};
  const std::string path = store.save_best(state, some_tensors(1.f));
  try {
    load_inference_model(path);
    FAIL() << "loaded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("image size 100000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// The run's checkpoints/ folder or the tensors file given as --checkpoint: an error that says what
// to give instead (it was a JSON syntax error at line 1).
TEST(Checkpoint, AFolderOrTheTensorsFileInsteadOfTheManifestSaysWhatToGive) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 1);
  const std::string manifest = store.save(3, {{"epoch", 0}}, some_tensors(1.f));
  for (const std::string& wrong :
       {dir.path(), manifest.substr(0, manifest.size() - 5) + ".safetensors"}) {
    try {
      read_checkpoint(wrong);
      FAIL() << wrong;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(".json"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
    }
  }
}

TEST(Checkpoint, KeepingNoCheckpointIsAUsageErrorNamingTheField) {
  test_util::TempDir dir;
  EXPECT_EQ(test_util::message_of<UsageError>([&] { CheckpointStore(dir.path(), 0); }),
            "keep_last must be at least 1, got 0");
}

TEST(Checkpoint, KeepsTheNewestK) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 2);
  for (int step = 1; step <= 4; ++step)
    store.save(step * 10, {}, some_tensors(step));
  const auto list = store.list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_NE(list[0].find("step-000000040.json"), std::string::npos);
  EXPECT_NE(list[1].find("step-000000030.json"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() + "/step-000000010.safetensors"));
}

void flip_byte(const std::string& path, size_t offset_from_end) {
  std::string bytes = read_file(path);
  bytes[bytes.size() - offset_from_end] ^= 0x5A;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checkpoint, CorruptedNewestIsSkippedForThePreviousOne) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 3);
  store.save(1, {}, some_tensors(1));
  store.save(2, {}, some_tensors(2));
  flip_byte(dir.path() + "/step-000000002.safetensors", 3);
  EXPECT_THROW(read_checkpoint(dir.path() + "/step-000000002.json"), DataError);
  const auto latest = store.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_FLOAT_EQ(first_value(*latest), 1.0f);
}

TEST(Checkpoint, TruncatedOrMissingFilesAreSkipped) {
  test_util::TempDir dir;
  CheckpointStore store(dir.path(), 5);
  store.save(1, {}, some_tensors(1));
  store.save(2, {}, some_tensors(2));
  store.save(3, {}, some_tensors(3));
  const std::string t3 = dir.path() + "/step-000000003.safetensors";
  fs::resize_file(t3, fs::file_size(t3) / 2);                       // truncated tensors
  std::ofstream(dir.path() + "/step-000000002.json") << "{\"form";  // truncated manifest
  const auto latest = store.load_latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_FLOAT_EQ(first_value(*latest), 1.0f);
  fs::remove(dir.path() + "/step-000000001.safetensors");
  EXPECT_FALSE(store.load_latest().has_value());
}

TEST(Checkpoint, AdamStateRoundTripsExactly) {
  auto model = test_util::make_tiny_classifier(7);
  const auto params = model->parameters();
  auto opt = make_optimizer(params, {});
  for (int i = 0; i < 3; ++i) {
    opt->zero_grad();
    model->forward(torch::randn({2, 3, 8, 8})).pow(2).mean().backward();
    opt->step();
  }
  const auto saved = optimizer_state(*opt, params);
  auto opt2 = make_optimizer(params, {});
  load_optimizer_state(*opt2, params, saved);
  const auto again = optimizer_state(*opt2, params);
  ASSERT_EQ(saved.size(), again.size());
  ASSERT_EQ(saved.size(), params.size() * 3);  // step, exp_avg, exp_avg_sq
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(saved[i].name, again[i].name);
    EXPECT_TRUE(torch::equal(saved[i].tensor, again[i].tensor)) << saved[i].name;
  }
  EXPECT_EQ(saved[0].tensor.item<int64_t>(), 3);  // three Adam steps
}

// What the trainer writes: the model's state dict and the optimizer state (for the checkpoints
// across devices and layouts below, which load into a model wherever and however its tensors live).
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
