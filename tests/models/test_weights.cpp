// Loading and saving weights: exact round trip, pretrained heads of another size replaced and
// reported, and every other mismatch a DataError naming the tensor, with the model left untouched.
#include <gtest/gtest.h>

#include "common/error.h"
#include "models/registry.h"
#include "models/weights.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::models {
namespace {

Classifier make(const std::string& arch, int64_t num_classes, uint64_t seed) {
  torch::manual_seed(seed);
  ModelOptions options;
  options.arch = arch;
  options.num_classes = num_classes;
  return make_model(options);
}

std::vector<NamedTensor> cloned_state(const torch::nn::Module& model) {
  std::vector<NamedTensor> out;
  for (const auto& [name, t] : state_dict(model))
    out.push_back({name, t.clone()});
  return out;
}

bool same_weights(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || !torch::equal(a[i].tensor, b[i].tensor)) return false;
  }
  return true;
}

// Expects load_state_dict to throw a DataError containing `needle` and leave the model unchanged.
void expect_rejected(const std::string& arch, int64_t num_classes,
                     const std::vector<NamedTensor>& tensors, const std::string& needle,
                     const LoadOptions& options = {}) {
  const Classifier model = make(arch, num_classes, 99);
  const auto before = cloned_state(*model);
  try {
    load_state_dict(*model, tensors, options);
    ADD_FAILURE() << "no error, expected: " << needle;
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
  EXPECT_TRUE(same_weights(before, cloned_state(*model))) << "a failed load changed the model";
}

TEST(WeightDtype, EveryNameRoundTripsAndABadOneListsTheValidOnes) {
  const std::pair<WeightDtype, torch::ScalarType> dtypes[] = {
      {WeightDtype::kF32, torch::kFloat32},
      {WeightDtype::kF16, torch::kFloat16},
      {WeightDtype::kBf16, torch::kBFloat16},
      {WeightDtype::kF64, torch::kFloat64}};
  for (const auto& [dtype, scalar] : dtypes) {
    EXPECT_EQ(parse_weight_dtype(to_string(dtype)), dtype) << to_string(dtype);
    EXPECT_EQ(scalar_type(dtype), scalar) << to_string(dtype);
  }
  EXPECT_STREQ(to_string(WeightDtype::kBf16), "bf16");
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_weight_dtype("f8"); }),
            "dtype 'f8': choose f32, f16, bf16 or f64");
}

TEST(Weights, StateDictAliasesTheModel) {
  const Classifier model = make("resnet18", 14, 0);
  auto sd = state_dict(*model);
  ASSERT_EQ(sd.size(), 122u);  // 62 parameters + 20 BatchNorms x 3 buffers
  torch::NoGradGuard no_grad;
  sd[0].tensor.fill_(3);
  EXPECT_EQ(model->named_parameters()["conv1.weight"].sum().item<double>(), 3.0 * 64 * 3 * 49);
}

TEST(Weights, SaveThenLoadIsExact) {
  const Classifier a = make("resnet18", 14, 1);
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : state_dict(*a)) {
      if (name.find("running_mean") != std::string::npos) t.normal_();
      if (name.find("num_batches_tracked") != std::string::npos) t.fill_(12);
    }
  }
  test_util::TempDir dir;
  save_weights(*a, dir.path() + "/w.safetensors");
  const Classifier b = make("resnet18", 14, 2);
  ASSERT_FALSE(same_weights(cloned_state(*a), cloned_state(*b)));
  const LoadReport report = load_weights(*b, dir.path() + "/w.safetensors");
  EXPECT_EQ(report.loaded, 122);
  EXPECT_TRUE(report.notes.empty());
  EXPECT_TRUE(same_weights(cloned_state(*a), cloned_state(*b)));
  const TensorFile file = read_safetensors(dir.path() + "/w.safetensors");
  EXPECT_EQ(file.metadata.at("arch"), "resnet18");
  EXPECT_EQ(file.metadata.at("num_classes"), "14");
  EXPECT_EQ(file.metadata.at("format"), "pt");
}

TEST(Weights, PretrainedHeadOfAnotherSizeIsReplacedAndReported) {
  const Classifier imagenet = make("densenet121", 1000, 5);
  const Classifier chexnet = make("densenet121", 14, 6);
  const torch::Tensor head_before = chexnet->head()->weight.clone();
  const LoadReport report = load_state_dict(*chexnet, state_dict(*imagenet));
  EXPECT_EQ(report.notes,
            (std::vector<std::string>{"replaced head classifier.weight [1000,1024] -> [14,1024]",
                                      "replaced head classifier.bias [1000] -> [14]"}));
  EXPECT_EQ(report.loaded, static_cast<int64_t>(state_dict(*chexnet).size()) - 2);
  EXPECT_TRUE(torch::equal(chexnet->head()->weight, head_before));  // kept at initialisation
  auto ours = state_dict(*chexnet);
  auto theirs = state_dict(*imagenet);
  for (std::size_t i = 0; i + 2 < ours.size(); ++i) {
    ASSERT_TRUE(torch::equal(ours[i].tensor, theirs[i].tensor)) << ours[i].name;
  }
}

TEST(Weights, HeadReplacementCanBeRefused) {
  LoadOptions strict;
  strict.replace_head = false;
  expect_rejected("resnet18", 14, state_dict(*make("resnet18", 1000, 1)),
                  "tensor 'fc.weight' has shape [1000,512], the model needs [14,512]", strict);
}

TEST(Weights, HeadWithOtherInputFeaturesIsAnError) {
  // resnet50's fc reads 2048 features; loading it into resnet18 (512) is wrong, head or not.
  auto tensors = state_dict(*make("resnet18", 1000, 1));
  for (auto& t : tensors) {
    if (t.name == "fc.weight") t.tensor = torch::zeros({1000, 2048});
  }
  expect_rejected("resnet18", 14, tensors, "tensor 'fc.weight' has shape [1000,2048]");
}

TEST(Weights, MissingTensorIsNamed) {
  auto tensors = state_dict(*make("resnet18", 14, 1));
  tensors.erase(std::find_if(tensors.begin(), tensors.end(), [](const NamedTensor& t) {
    return t.name == "layer1.0.bn1.running_var";
  }));
  expect_rejected("resnet18", 14, tensors, "missing tensor 'layer1.0.bn1.running_var'");
}

TEST(Weights, UnexpectedTensorIsNamed) {
  auto tensors = state_dict(*make("resnet18", 14, 1));
  tensors.push_back({"fc2.weight", torch::zeros({3})});
  expect_rejected("resnet18", 14, tensors, "unexpected tensor 'fc2.weight'");
}

TEST(Weights, WrongShapeIsNamed) {
  auto tensors = state_dict(*make("resnet18", 14, 1));
  tensors[3].tensor = torch::zeros({65});
  expect_rejected("resnet18", 14, tensors,
                  "tensor '" + tensors[3].name + "' has shape [65], the model needs [64]");
}

TEST(Weights, WrongDtypeIsNamed) {
  auto tensors = state_dict(*make("resnet18", 14, 1));
  tensors[0].tensor = tensors[0].tensor.to(torch::kInt64);
  expect_rejected("resnet18", 14, tensors,
                  "tensor 'conv1.weight' has dtype I64, the model needs F32");
  auto bools = state_dict(*make("resnet18", 14, 1));
  for (auto& t : bools) {
    if (t.name == "bn1.num_batches_tracked") t.tensor = torch::ones({}, torch::kFloat32);
  }
  expect_rejected("resnet18", 14, bools,
                  "tensor 'bn1.num_batches_tracked' has dtype F32, the model needs I64");
}

TEST(Weights, AllProblemsAreListed) {
  auto tensors = state_dict(*make("resnet18", 14, 1));
  tensors.push_back({"extra.a", torch::zeros({1})});
  tensors.push_back({"extra.b", torch::zeros({1})});
  tensors[0].tensor = torch::zeros({1});
  expect_rejected("resnet18", 14, tensors, "unexpected tensor 'extra.b'");
}

TEST(Weights, HalfPrecisionFilesAreConvertedAndReported) {
  const Classifier source = make("resnet18", 14, 1);
  test_util::TempDir dir;
  save_weights(*source, dir.path() + "/w16.safetensors", torch::kFloat16);
  const Classifier model = make("resnet18", 14, 2);
  const LoadReport report = load_weights(*model, dir.path() + "/w16.safetensors");
  // 62 parameters + 40 running statistics are floating; num_batches_tracked stays I64.
  EXPECT_EQ(report.notes, (std::vector<std::string>{"converted 102 tensors from F16 to F32"}));
  const auto ours = state_dict(*model);
  const auto theirs = state_dict(*source);
  for (std::size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].tensor.scalar_type(), theirs[i].tensor.scalar_type());
    EXPECT_TRUE(torch::equal(
        ours[i].tensor, theirs[i].tensor.to(torch::kFloat16).to(theirs[i].tensor.scalar_type())))
        << ours[i].name;
  }
  save_weights(*source, dir.path() + "/wbf16.safetensors", torch::kBFloat16);
  EXPECT_EQ(load_weights(*model, dir.path() + "/wbf16.safetensors").notes,
            (std::vector<std::string>{"converted 102 tensors from BF16 to F32"}));
  save_weights(*source, dir.path() + "/w64.safetensors", torch::kFloat64);
  load_weights(*model, dir.path() + "/w64.safetensors");
  EXPECT_TRUE(same_weights(cloned_state(*model), cloned_state(*source)));
}

TEST(Weights, LegacyDenseNetNamesAndAbsentBatchCountersLoad) {
  const Classifier source = make("densenet121", 14, 1);
  std::vector<NamedTensor> legacy;
  int64_t renamed = 0;
  for (const auto& [name, t] : state_dict(*source)) {
    if (name.find("num_batches_tracked") != std::string::npos) continue;
    std::string old = name;
    for (const char* part : {".norm1.", ".norm2.", ".conv1.", ".conv2."}) {
      const auto pos = old.find(part);
      if (pos != std::string::npos && old.find("denselayer") != std::string::npos) {
        old.replace(pos, 6, std::string(part).substr(0, 5) + "." + part[5]);
        ++renamed;
      }
    }
    legacy.push_back({old, t});
  }
  ASSERT_EQ(legacy[4].name, "features.norm0.running_var");
  const Classifier model = make("densenet121", 14, 2);
  const LoadReport report = load_state_dict(*model, legacy);
  EXPECT_EQ(report.notes,
            (std::vector<std::string>{
                "mapped " + std::to_string(renamed) + " legacy DenseNet names (norm.1 -> norm1)",
                "121 num_batches_tracked buffers absent from the file, left at 0"}));
  const auto ours = state_dict(*model);
  const auto theirs = state_dict(*source);
  for (std::size_t i = 0; i < ours.size(); ++i) {
    if (ours[i].name.find("num_batches_tracked") != std::string::npos) continue;
    ASSERT_TRUE(torch::equal(ours[i].tensor, theirs[i].tensor)) << ours[i].name;
  }
}

}  // namespace
}  // namespace chexscale::models
