// `chexscale export-weights`: fresh, seeded exports and exports converted from "ImageNet" weights
// with a replaced head.
#include <gtest/gtest.h>

#include "cli/cli_output.h"
#include "common/atomic_file.h"
#include "models/safetensors.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::contains;
using test_util::run_chexscale;

TEST(CliExportWeights, SeededExportIsReproducibleAndComplete) {
  test_util::TempDir dir;
  const std::string a = dir.path() + "/a.safetensors", b = dir.path() + "/b.safetensors",
                    c = dir.path() + "/c.safetensors";
  auto r = run_chexscale("export-weights --arch resnet18 --seed 4 --out " + a);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "wrote 122 tensors of resnet18")) << r.output;
  ASSERT_EQ(run_chexscale("export-weights --arch resnet18 --seed 4 --out " + b).exit_code, 0);
  ASSERT_EQ(
      run_chexscale("export-weights --arch resnet18 --seed 5 --dtype f16 --out " + c).exit_code, 0);
  EXPECT_EQ(read_file(a), read_file(b));
  const models::TensorFile fa = models::read_safetensors(a);
  const models::TensorFile fc = models::read_safetensors(c);
  ASSERT_EQ(fa.tensors.size(), 122u);
  EXPECT_EQ(fa.tensors[0].name, "conv1.weight");
  EXPECT_EQ(fa.tensors[0].tensor.sizes().vec(), (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(fa.metadata.at("arch"), "resnet18");
  EXPECT_EQ(fc.tensors[0].tensor.scalar_type(), torch::kFloat16);
  EXPECT_FALSE(torch::equal(fa.tensors[0].tensor, fc.tensors[0].tensor.to(torch::kFloat32)));
}

TEST(CliExportWeights, PretrainedImageNetHeadIsReplaced) {
  test_util::TempDir dir;
  const std::string imagenet = dir.path() + "/imagenet.safetensors";
  const std::string chexnet = dir.path() + "/chexnet.safetensors";
  ASSERT_EQ(
      run_chexscale("export-weights --arch resnet18 --num-classes 1000 --seed 1 --out " + imagenet)
          .exit_code,
      0);
  const auto r = run_chexscale("export-weights --arch resnet18 --seed 2 --pretrained " + imagenet +
                               " --out " + chexnet);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "replaced head fc.weight [1000,512] -> [14,512]")) << r.output;
  const models::TensorFile in = models::read_safetensors(imagenet);
  const models::TensorFile out = models::read_safetensors(chexnet);
  ASSERT_EQ(in.tensors.size(), out.tensors.size());
  for (std::size_t i = 0; i < in.tensors.size(); ++i) {
    const bool head = in.tensors[i].name.rfind("fc.", 0) == 0;
    EXPECT_EQ(torch::equal(in.tensors[i].tensor, out.tensors[i].tensor), !head)
        << in.tensors[i].name;
  }
  // Weights of another architecture are refused, naming a tensor.
  const auto bad = run_chexscale("export-weights --arch resnet34 --pretrained " + imagenet +
                                 " --out " + dir.path() + "/x.safetensors");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_TRUE(contains(bad.output, "missing tensor 'layer1.2.conv1.weight'")) << bad.output;
}

}  // namespace
}  // namespace chexscale
