// The registry's architectures: against torchvision (parameter counts, the full state_dict: names,
// shapes, dtypes, order), initialisation statistics, features/forward consistency, and the
// registry's errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "models/registry.h"
#include "models/safetensors.h"
#include "models/torchvision_reference.h"
#include "models/weights.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::models {
namespace {

using nlohmann::json;

Classifier make(const std::string& arch, int64_t num_classes = kChestXray14Classes,
                double dropout = 0.0) {
  ModelOptions options;
  options.arch = arch;
  options.num_classes = num_classes;
  options.dropout = dropout;
  return make_model(options);
}

// torchvision's parameter counts and state_dicts, produced once per process. Loaded inside each
// test (not in SetUpTestSuite, whose failure gtest reports as skipped tests) so that a missing
// torchvision fails the tests.
const json& torchvision_reference() {
  static const json reference = [] {
    test_util::TempDir dir;
    test_util::run_torchvision_reference("state-dicts " + dir.path() + "/reference.json");
    return json::parse(read_file(dir.path() + "/reference.json"));
  }();
  return reference;
}

TEST(AgainstTorchvision, ParameterCountsAndFullStateDictMatch) {
  std::vector<std::string> theirs;
  for (const auto& item : torchvision_reference().items())
    theirs.push_back(item.key());
  std::vector<std::string> ours = architectures();
  std::sort(theirs.begin(), theirs.end());
  std::sort(ours.begin(), ours.end());
  ASSERT_EQ(ours, theirs);
  for (const std::string& arch : architectures()) {
    SCOPED_TRACE(arch);
    const json& ref = torchvision_reference().at(arch);
    const Classifier model = make(arch);
    EXPECT_EQ(count_parameters(*model), ref.at("parameters").get<int64_t>());
    const std::vector<NamedTensor> ours = state_dict(*model);
    const json& theirs = ref.at("state_dict");
    ASSERT_EQ(ours.size(), theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
      ASSERT_EQ(ours[i].name, theirs[i][0].get<std::string>()) << "entry " << i;
      EXPECT_EQ(ours[i].tensor.sizes().vec(), theirs[i][1].get<std::vector<int64_t>>())
          << ours[i].name;
      EXPECT_STREQ(safetensors::to_string(to_safetensors_dtype(ours[i].tensor.scalar_type())),
                   theirs[i][2].get<std::string>().c_str())
          << ours[i].name;
    }
  }
}

// The counts the CheXNet issue states (independent of torchvision at test time).
TEST(Architectures, CheXNetParameterCounts) {
  EXPECT_EQ(count_parameters(*make("densenet121")), 6968206);
  EXPECT_EQ(count_parameters(*make("resnet50")), 23536718);
  // torchvision's documented ImageNet sizes.
  EXPECT_EQ(count_parameters(*make("densenet121", 1000)), 7978856);
  EXPECT_EQ(count_parameters(*make("resnet50", 1000)), 25557032);
}

// torchvision's init: DenseNet convs kaiming_normal_(fan_in), ResNet convs kaiming_normal_(fan_out,
// relu), BN weight 1 / bias 0, DenseNet classifier bias 0. Checked on the 64x3x7x7 stem conv.
TEST(Architectures, InitialisationFollowsTorchvision) {
  torch::manual_seed(3);
  const Classifier densenet = make("densenet121");
  const auto d = state_dict(*densenet);
  const double fan_in = 3 * 7 * 7, fan_out = 64 * 7 * 7;
  EXPECT_NEAR(d[0].tensor.std().item<double>(), std::sqrt(2.0 / fan_in),
              0.05 * std::sqrt(2 / fan_in));
  EXPECT_EQ(densenet->head()->bias.abs().sum().item<double>(), 0.0);
  const Classifier resnet = make("resnet50");
  const auto r = state_dict(*resnet);
  EXPECT_EQ(r[0].name, "conv1.weight");
  EXPECT_NEAR(r[0].tensor.std().item<double>(), std::sqrt(2.0 / fan_out),
              0.05 * std::sqrt(2 / fan_out));
  // nn.Linear default bias init: U(-1/sqrt(in), 1/sqrt(in)), not zero.
  EXPECT_GT(resnet->head()->bias.abs().sum().item<double>(), 0.0);
  EXPECT_LE(resnet->head()->bias.abs().max().item<double>(), 1.0 / std::sqrt(2048.0));
  for (const auto& [name, t] : r) {
    if (name == "bn1.weight") {
      EXPECT_TRUE(torch::all(t == 1).item<bool>());
    }
    if (name == "bn1.bias") {
      EXPECT_TRUE(torch::all(t == 0).item<bool>());
    }
  }
}

TEST(Architectures, ForwardIsHeadOfPooledFeatures) {
  torch::manual_seed(0);
  for (const std::string arch : {"densenet121", "resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    const Classifier model = make(arch, 5);
    model->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor x = torch::randn({2, 3, 64, 64});
    const torch::Tensor f = model->features(x);
    EXPECT_EQ(f.size(0), 2);
    EXPECT_EQ(f.size(1), model->head()->options.in_features());
    EXPECT_EQ(f.size(2), 2);                 // 64 / 32
    EXPECT_GE(f.min().item<double>(), 0.0);  // after the final ReLU
    const torch::Tensor logits = model->forward(x);
    EXPECT_EQ(logits.sizes().vec(), (std::vector<int64_t>{2, 5}));
    EXPECT_TRUE(torch::allclose(logits, model->head()(f.mean({2, 3})), 1e-5, 1e-5));
  }
}

// smallest_input_side is what the models take: a forward pass at that side yields feature maps,
// one pixel less is refused by LibTorch and by check_input_side. 224 px gives torchvision's 7x7.
TEST(Architectures, SmallestInputSideIsWhatTheModelsTake) {
  EXPECT_EQ(smallest_input_side("densenet121"), 29);
  EXPECT_EQ(smallest_input_side("densenet201"), 29);
  EXPECT_EQ(smallest_input_side("resnet18"), 1);
  EXPECT_EQ(smallest_input_side("resnet101"), 1);
  torch::NoGradGuard no_grad;
  for (const std::string arch : {"densenet121", "resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    const Classifier model = make(arch);
    model->eval();
    const int64_t side = smallest_input_side(arch);
    EXPECT_EQ(model->features(torch::randn({1, 3, side, side})).size(2), 1);
    EXPECT_EQ(model->features(torch::randn({1, 3, 224, 224})).size(2), 7);
    EXPECT_NO_THROW(check_input_side(arch, side, "crop_size"));
    if (side == 1) continue;
    EXPECT_THROW(model->features(torch::randn({1, 3, side - 1, side - 1})), c10::Error);
    EXPECT_EQ(
        test_util::message_of<UsageError>([&] { check_input_side(arch, side - 1, "crop_size"); }),
        fmt::format("crop_size {} px is below {}'s smallest input, {} px (its pooling "
                    "would leave no pixel)",
                    side - 1, arch, side));
  }
  EXPECT_THROW(smallest_input_side("densenet122"), UsageError);
}

TEST(Architectures, DropoutActsOnlyInTrainingAndAddsNoWeights) {
  torch::manual_seed(0);
  const Classifier model = make("resnet18", 14, 0.5);
  EXPECT_EQ(state_dict(*model).size(), state_dict(*make("resnet18")).size());
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::randn({2, 3, 32, 32});
  model->eval();
  EXPECT_TRUE(torch::equal(model->forward(x), model->forward(x)));
  const torch::Tensor pooled = model->features(x).mean({2, 3});
  EXPECT_TRUE(torch::allclose(model->forward(x), model->head()(pooled), 1e-5, 1e-5));
  model->train();
  EXPECT_FALSE(torch::allclose(model->forward(x), model->forward(x)));
}

TEST(Architectures, UnknownArchitectureListsTheValidOnes) {
  try {
    make("densenet122");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'densenet122'"), std::string::npos) << what;
    for (const std::string& arch : architectures()) {
      EXPECT_NE(what.find(arch), std::string::npos) << what;
    }
  }
  EXPECT_EQ(architectures().size(), 7u);
}

TEST(Architectures, BadOptionsAreUsageErrors) {
  EXPECT_THROW(make("resnet18", 0), UsageError);
  EXPECT_THROW(make("resnet18", 14, 1.0), UsageError);
  EXPECT_THROW(make("resnet18", 14, -0.1), UsageError);
}

}  // namespace
}  // namespace chexscale::models
