// scripts/gpu-check.sh rehearsed on the CPU (DEVICE=cpu, tiny sizes): the script that will run
// unattended on a lent GPU machine, where a mistake costs the whole lease, must parse its runs,
// compare losses, evaluate a checkpoint on two devices and tabulate the sweep correctly here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>

#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::file_contents;

// Runs gpu-check.sh with `env` (VAR=value ...) and `parts`; returns its status and output.
test_util::ProcessResult run_gpu_check(const std::string& out, const std::string& env,
                                       const std::string& parts) {
  const std::string cmd = "env OUT=" + out + " BIN=" + test_util::chexscale_bin() +
                          " PYTHON=/usr/bin/python3 DEVICE=cpu THREADS=1 " + env + " bash " +
                          test_util::source_dir() + "/scripts/gpu-check.sh " + parts;
  return test_util::run_shell(cmd);
}

int count_lines_matching(const std::string& text, const std::regex& re) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    n += std::regex_search(line, re) ? 1 : 0;
  return n;
}

TEST(GpuCheckRehearsal, CorrectnessAndSweepRunAndReportOnTheCpu) {
  test_util::TempDir tmp;
  const std::string out = tmp.path() + "/check";
  const auto r = run_gpu_check(out,
                               "CHECK_ARCH=resnet18 CHECK_IMAGE_SIZE=64 ARCHS=resnet18 BATCHES=2 "
                               "MODES='fp32 bf16-cl' IMAGE_SIZE=64 STEPS=2 WARMUP=1",
                               "correctness sweep");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Four comparisons, each over every logged step, each within its tolerance.
  EXPECT_EQ(count_lines_matching(r.output, std::regex(R"(steps 8/8 .* ok$)")), 3) << r.output;
  EXPECT_EQ(count_lines_matching(r.output, std::regex(R"(steps 1/1 .* ok$)")), 1) << r.output;
  EXPECT_EQ(count_lines_matching(r.output, std::regex("FAIL")), 0) << r.output;

  // The sweep table: one row per configuration with both sides measured and their ratio.
  const std::string summary = file_contents(out + "/summary.md");
  EXPECT_NE(summary.find("all checks passed"), std::string::npos) << summary;
  const std::string sweep = file_contents(out + "/sweep.md");
  const std::regex row(
      R"(\| resnet18 \| 2 \| (fp32|bf16-cl) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|)");
  int rows = 0;
  for (std::sregex_iterator it(sweep.begin(), sweep.end(), row), end; it != end; ++it, ++rows) {
    const double ours = std::stod((*it)[2]);
    const double peer = std::stod((*it)[3]);
    EXPECT_GT(ours, 0.0);
    EXPECT_GT(peer, 0.0);
    EXPECT_NEAR(std::stod((*it)[4]), ours / peer, 0.002 + 0.06 * ours / peer)  // rounded to 0.1
        << (*it)[0];
  }
  EXPECT_EQ(rows, 2) << sweep;
}

TEST(GpuCheckRehearsal, FailuresAreNamedInTheSummaryAndTheExitStatus) {
  test_util::TempDir tmp;
  const std::string out = tmp.path() + "/check";
  const auto r = run_gpu_check(
      out, "CHECK_ARCH=no-such-arch CHECK_IMAGE_SIZE=64 ARCHS=no-such-arch BATCHES=2 MODES=fp32",
      "correctness sweep");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string summary = file_contents(out + "/summary.md");
  EXPECT_NE(summary.find("FAILED: train ref"), std::string::npos) << summary;
  EXPECT_NE(summary.find("FAILED: correctness tolerances"), std::string::npos) << summary;
  // A configuration where both sides failed still has its row.
  EXPECT_NE(summary.find("| no-such-arch | 2 | fp32 | failed | failed | - |"), std::string::npos)
      << summary;
}

TEST(GpuCheckRehearsal, RefusesToBuildOrRunUnknownPartsOnTheCpu) {
  test_util::TempDir tmp;
  EXPECT_EQ(run_gpu_check(tmp.path() + "/a", "", "all").exit_code, 2);
  EXPECT_EQ(run_gpu_check(tmp.path() + "/b", "", "build").exit_code, 2);
  EXPECT_EQ(run_gpu_check(tmp.path() + "/c", "", "sweep bogus").exit_code, 2);
  EXPECT_EQ(run_gpu_check(tmp.path() + "/d", "DEVICE=tpu", "sweep").exit_code, 2);
}

}  // namespace
}  // namespace chexscale
