// `chexscale models`: the table of architectures with parameter counts, and the head size from
// flag, environment and config file.
#include <gtest/gtest.h>

#include <sstream>

#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::run_chexscale;

// The row of `arch` in the models table, split into words.
std::vector<std::string> row_of(const std::string& table, const std::string& arch) {
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> row;
    std::string w;
    while (words >> w)
      row.push_back(w);
    if (!row.empty() && row[0] == arch) return row;
  }
  return {};
}

TEST(CliModels, TableShowsParameterCounts) {
  const auto r = run_chexscale("models");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_of(r.output, "densenet121"),
            (std::vector<std::string>{"densenet121", "6,968,206", "1024", "classifier"}));
  EXPECT_EQ(row_of(r.output, "resnet50"),
            (std::vector<std::string>{"resnet50", "23,536,718", "2048", "fc"}));
  for (const char* arch : {"densenet169", "densenet201", "resnet18", "resnet34", "resnet101"}) {
    EXPECT_EQ(row_of(r.output, arch).size(), 4u) << arch << "\n" << r.output;
  }
}

TEST(CliModels, HeadSizeFromFlagEnvAndConfig) {
  // torchvision's documented ImageNet (1000-class) sizes.
  auto r = run_chexscale("models --num-classes 1000");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_of(r.output, "densenet121").at(1), "7,978,856");
  EXPECT_EQ(row_of(r.output, "resnet50").at(1), "25,557,032");
  r = run_chexscale("models", {"CHEXSCALE_NUM_CLASSES=1000"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_of(r.output, "resnet50").at(1), "25,557,032");
  test_util::TempDir dir;
  const std::string config = dir.write("c.yaml", "models:\n  num-classes: 1000\n");
  r = run_chexscale("models --config " + config);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_of(r.output, "resnet50").at(1), "25,557,032");
}

}  // namespace
}  // namespace chexscale
