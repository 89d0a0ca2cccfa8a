// Logits against torchvision's, both ways: torchvision's random weights loaded by chexscale, and
// chexscale's weights loaded by torchvision (strict load_state_dict), eval mode, 2x3x64x64 input.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "models/safetensors.h"
#include "models/torchvision_reference.h"
#include "models/weights.h"
#include "test_util/temp_dir.h"

namespace chexscale::models {
namespace {

constexpr double kTolerance = 1e-4;  // relative, as the issue asks

torch::Tensor only_tensor(const std::string& path, const std::string& name) {
  const TensorFile file = read_safetensors(path);
  for (const auto& t : file.tensors) {
    if (t.name == name) return t.tensor;
  }
  throw std::runtime_error("no tensor " + name + " in " + path);
}

Classifier make(const std::string& arch) {
  ModelOptions options;
  options.arch = arch;
  return make_model(options);
}

void torchvision_weights_give_torchvision_logits(const std::string& arch) {
  test_util::TempDir dir;
  test_util::run_torchvision_reference("make-case " + arch + " " + dir.path() + " --size 64");
  const Classifier model = make(arch);
  const LoadReport report = load_weights(*model, dir.path() + "/weights.safetensors");
  EXPECT_EQ(report.loaded, static_cast<int64_t>(state_dict(*model).size()));
  EXPECT_TRUE(report.notes.empty());
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits =
      model->forward(only_tensor(dir.path() + "/input.safetensors", "input"));
  const torch::Tensor expected = only_tensor(dir.path() + "/expected.safetensors", "logits");
  ASSERT_EQ(logits.sizes(), expected.sizes());
  EXPECT_GT(expected.abs().max().item<double>(), 1e-3);  // a meaningful comparison
  EXPECT_LE(test_util::relative_error(logits, expected), kTolerance);
}

// Fresh chexscale weights with random BatchNorm statistics, so every buffer's mapping matters.
void chexscale_weights_give_chexscale_logits(const std::string& arch) {
  torch::manual_seed(11);
  const Classifier model = make(arch);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : state_dict(*model)) {
      if (name.find("running_mean") != std::string::npos) t.normal_(0, 0.1);
      if (name.find("running_var") != std::string::npos) t.uniform_(0.5, 1.5);
      if (name.find("num_batches_tracked") != std::string::npos) t.fill_(7);
    }
  }
  model->eval();
  test_util::TempDir dir;
  const torch::Tensor input = torch::randn({2, 3, 64, 64});
  write_safetensors(dir.path() + "/input.safetensors", {{"input", input}});
  save_weights(*model, dir.path() + "/weights.safetensors");
  test_util::run_torchvision_reference("logits " + arch + " " + dir.path() +
                                       "/weights.safetensors " + dir.path() +
                                       "/input.safetensors " + dir.path() + "/logits.safetensors");
  torch::NoGradGuard no_grad;
  const torch::Tensor ours = model->forward(input);
  const torch::Tensor theirs = only_tensor(dir.path() + "/logits.safetensors", "logits");
  ASSERT_EQ(ours.sizes(), theirs.sizes());
  EXPECT_GT(theirs.abs().max().item<double>(), 1e-3);
  EXPECT_LE(test_util::relative_error(ours, theirs), kTolerance);
}

TEST(TorchvisionCrossCheck, Densenet121LoadsTorchvisionWeights) {
  torchvision_weights_give_torchvision_logits("densenet121");
}

TEST(TorchvisionCrossCheck, Resnet50LoadsTorchvisionWeights) {
  torchvision_weights_give_torchvision_logits("resnet50");
}

TEST(TorchvisionCrossCheck, TorchvisionLoadsDensenet121Weights) {
  chexscale_weights_give_chexscale_logits("densenet121");
}

TEST(TorchvisionCrossCheck, TorchvisionLoadsResnet50Weights) {
  chexscale_weights_give_chexscale_logits("resnet50");
}

}  // namespace
}  // namespace chexscale::models
