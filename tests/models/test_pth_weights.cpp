// PyTorch .pth state dicts against torchvision: files torch.save wrote (zip and legacy format,
// DenseNet's old layer names) load and give torchvision's logits; `export-weights --format pth`
// writes what torch.load reads; files that are not the model's state dict, and mutated pickles,
// are clear errors.
#include <gtest/gtest.h>

#include <caffe2/serialize/inline_container.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "models/pth_weights.h"
#include "models/registry.h"
#include "models/safetensors.h"
#include "models/torch_pickle.h"
#include "models/torchvision_reference.h"
#include "models/weights.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale::models {
namespace {

constexpr double kTolerance = 1e-4;  // relative, as in the safetensors cross-check

torch::Tensor only_tensor(const std::string& path, const std::string& name) {
  for (const auto& t : read_safetensors(path).tensors) {
    if (t.name == name) return t.tensor;
  }
  throw std::runtime_error("no tensor " + name + " in " + path);
}

Classifier make(const std::string& arch) {
  ModelOptions options;
  options.arch = arch;
  return make_model(options);
}

// torchvision's random weights saved by torch.save as `pth`, loaded by chexscale: the logits must
// be torchvision's. Returns the load's report.
LoadReport pth_gives_torchvision_logits(const std::string& arch, const std::string& pth) {
  test_util::TempDir dir;
  test_util::run_torchvision_reference("make-case " + arch + " " + dir.path() +
                                       " --size 32 --pth " + pth);
  EXPECT_TRUE(is_pth_file(dir.path() + "/weights.pth"));
  EXPECT_FALSE(is_pth_file(dir.path() + "/weights.safetensors"));
  const Classifier model = make(arch);
  const LoadReport report = load_weights(*model, dir.path() + "/weights.pth");
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor logits =
      model->forward(only_tensor(dir.path() + "/input.safetensors", "input"));
  const torch::Tensor expected = only_tensor(dir.path() + "/expected.safetensors", "logits");
  EXPECT_EQ(logits.sizes(), expected.sizes());
  EXPECT_GT(expected.abs().max().item<double>(), 1e-3);  // a meaningful comparison
  EXPECT_LE(test_util::relative_error(logits, expected), kTolerance);
  return report;
}

TEST(PthWeights, Resnet18ZipStateDictGivesTorchvisionLogits) {
  const LoadReport report = pth_gives_torchvision_logits("resnet18", "zip");
  EXPECT_EQ(report.loaded, static_cast<int64_t>(state_dict(*make("resnet18")).size()));
  EXPECT_TRUE(report.notes.empty());
}

TEST(PthWeights, Resnet18LegacyStateDictGivesTorchvisionLogits) {
  const LoadReport report = pth_gives_torchvision_logits("resnet18", "legacy");
  EXPECT_TRUE(report.notes.empty());
}

// torchvision's DenseNet checkpoints are legacy files with pre-0.4 layer names and no
// num_batches_tracked: the names are mapped as torchvision's loader maps them.
TEST(PthWeights, Densenet121LegacyStateDictWithOldNamesGivesTorchvisionLogits) {
  const LoadReport report = pth_gives_torchvision_logits("densenet121", "legacy-names");
  ASSERT_EQ(report.notes.size(), 2u);
  EXPECT_EQ(report.notes[0], "mapped 580 legacy DenseNet names (norm.1 -> norm1)");
  EXPECT_EQ(report.notes[1], "121 num_batches_tracked buffers absent from the file, left at 0");
}

// `export-weights --format pth`: torch.load reads the file and torchvision's strict
// load_state_dict gives the same logits; chexscale reads it back tensor for tensor.
TEST(PthWeights, ExportedPthIsReadByTorchLoadAndBack) {
  test_util::TempDir dir;
  const std::string out = dir.path() + "/resnet18.weights";
  const auto r = test_util::run_chexscale(
      "export-weights --arch resnet18 --seed 5 --format pth "
      "--out " +
      out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(14 classes, f32, pth)"), std::string::npos) << r.output;
  ASSERT_TRUE(is_pth_file(out));
  std::filesystem::rename(out, dir.path() + "/w.pth");

  const Classifier model = make("resnet18");
  const LoadReport report = load_weights(*model, dir.path() + "/w.pth");
  EXPECT_EQ(report.loaded, static_cast<int64_t>(state_dict(*model).size()));
  torch::manual_seed(5);
  const Classifier fresh = make("resnet18");
  const auto expected = state_dict(*fresh);
  const auto loaded = state_dict(*model);
  ASSERT_EQ(loaded.size(), expected.size());
  for (std::size_t i = 0; i < loaded.size(); ++i)
    EXPECT_TRUE(torch::equal(loaded[i].tensor, expected[i].tensor)) << loaded[i].name;

  model->eval();
  const torch::Tensor input = torch::randn({2, 3, 32, 32});
  write_safetensors(dir.path() + "/input.safetensors", {{"input", input}});
  test_util::run_torchvision_reference("logits resnet18 " + dir.path() + "/w.pth " + dir.path() +
                                       "/input.safetensors " + dir.path() + "/logits.safetensors");
  torch::NoGradGuard no_grad;
  const torch::Tensor theirs = only_tensor(dir.path() + "/logits.safetensors", "logits");
  EXPECT_GT(theirs.abs().max().item<double>(), 1e-3);
  EXPECT_LE(test_util::relative_error(model->forward(input), theirs), kTolerance);
}

std::string load_error(const std::string& path) {
  const Classifier model = make("resnet18");
  try {
    load_weights(*model, path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

void expect_error(const std::string& path, const std::string& expected) {
  const std::string message = load_error(path);
  EXPECT_NE(message.find(path + ": "), std::string::npos) << message;
  EXPECT_NE(message.find(expected), std::string::npos) << message;
}

TEST(PthWeights, FilesThatAreNotTheModelsStateDictAreClearErrors) {
  test_util::TempDir dir;
  test_util::run_torchvision_reference("bad-pth resnet18 " + dir.path());
  const std::string d = dir.path() + "/";
  expect_error(d + "model.pth",
               "the file pickles torchvision.models.resnet.ResNet, which a state dict does not "
               "hold");
  expect_error(d + "checkpoint.pth", "not a state dict: 'epoch' holds int, not a tensor");
  expect_error(d + "missing.pth", "missing tensor 'conv1.weight'");
  expect_error(d + "extra.pth", "unexpected tensor 'extra.weight'");
  expect_error(d + "shape.pth",
               "tensor 'conv1.weight' has shape [2,2], the model needs [64,3,7,7]");

  // Cut short: the zip's directory and the legacy file's storages are missing.
  test_util::run_torchvision_reference("make-case resnet18 " + dir.path() + " --size 32 --pth zip");
  std::filesystem::copy_file(d + "weights.pth", d + "cut.pth");
  std::filesystem::resize_file(d + "cut.pth", std::filesystem::file_size(d + "cut.pth") / 2);
  expect_error(d + "cut.pth", "not a readable torch.save zip archive");
  test_util::run_torchvision_reference("make-case resnet18 " + dir.path() +
                                       " --size 32 --pth legacy");
  std::filesystem::copy_file(d + "weights.pth", d + "cut-legacy.pth");
  std::filesystem::resize_file(d + "cut-legacy.pth",
                               std::filesystem::file_size(d + "cut-legacy.pth") / 2);
  expect_error(d + "cut-legacy.pth", "is truncated");
  std::ofstream(d + "junk.pth") << "PK\x03\x04 not really a zip";
  expect_error(d + "junk.pth", "not a readable torch.save zip archive");
}

// The unpickler on hostile bytes: a state dict's pickle with random bytes changed parses or is a
// DataError, never another exception or a crash (a bounded mutation run).
TEST(PthWeights, MutatedPicklesAreDataErrors) {
  test_util::TempDir dir;
  write_pth(dir.path() + "/w.pth",
            {{"a.weight", torch::randn({3, 4})}, {"a.bias", torch::arange(5)}});
  caffe2::serialize::PyTorchStreamReader reader(dir.path() + "/w.pth");
  const auto [record, size] = reader.getRecord("data.pkl");
  const auto* bytes = static_cast<const uint8_t*>(record.get());
  const std::vector<uint8_t> pickle(bytes, bytes + size);
  std::size_t pos = 0;
  ASSERT_EQ(torch_pickle::parse(pickle.data(), pickle.size(), pos)->entries.size(), 2u);
  std::mt19937 rng(7);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> mutated = pickle;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips)
      mutated[rng() % mutated.size()] = static_cast<uint8_t>(rng());
    mutated.resize(mutated.size() - rng() % 4);
    pos = 0;
    try {
      torch_pickle::parse(mutated.data(), mutated.size(), pos);
    } catch (const DataError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100);  // the mutations reach the error paths
}

}  // namespace
}  // namespace chexscale::models
