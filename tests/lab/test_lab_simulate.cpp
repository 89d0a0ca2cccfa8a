// The simulator against the lab, in `make test`: bench/simulate/lab_check.sh predicts two small
// configurations (DenseNet-121 at 64 px, batch 8, naive and overlapped, over the lab's 1 Gbit/s
// fabric and 250 Mbit/s overlay: four predictions, both systems) from the one-worker compute
// profile and the paths' commbench profiles alone, measures them with lab/compare.sh, and each
// prediction must be within the goal's 10 % of the measured images/s. Other configurations are
// predicted less well (the uncapped, CPU-bound ones and fp16 on CPU Gloo: docs/comparison.md);
// these are the bandwidth-bound kind the simulator is for. Runs alone (ctest RUN_SERIAL): other
// tests' load would be measured instead.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "lab/lab_fixture.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

constexpr double kMaxError = 0.10;

class LabSimulate : public LabTest {};

TEST_F(LabSimulate, TwoCappedConfigurationsArePredictedWithinTenPercent) {
  TempDir dir;
  const std::string out = dir.path() + "/check";
  const ProcessResult r =
      run_shell(env() + " bash " + source_dir() +
                "/bench/simulate/lab_check.sh --archs densenet121 --caps 1gbit/250mbit "
                "--variants naive,overlapped --steps 8 --warmup 2 --bin " +
                chexscale_bin() + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(namespaces().empty()) << "lab_check.sh left its lab up";
  std::istringstream rows(file_contents(out + "/check.tsv"));
  std::string line;
  std::getline(rows, line);  // the header
  int checked = 0;
  while (std::getline(rows, line)) {
    std::istringstream fields(line);
    std::string arch, cap, layout, system, variant;
    double measured = 0, predicted = 0, error = 0;
    fields >> arch >> cap >> layout >> system >> variant >> measured >> predicted >> error;
    ASSERT_FALSE(fields.fail()) << line;
    EXPECT_EQ(layout, "2x1") << line;  // lab_check.sh's default: two nodes of one worker
    EXPECT_NEAR(error, (predicted - measured) / measured, 1e-6) << line;
    fmt::print("{} {} {}: measured {:.2f} images/s, predicted {:.2f}, error {:+.1f} %\n", arch,
               system, variant, measured, predicted, 100 * error);
    EXPECT_LE(std::abs(error), kMaxError) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

}  // namespace
}  // namespace chexscale::test_util
