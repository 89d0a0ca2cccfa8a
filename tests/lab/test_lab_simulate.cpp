// The simulator against the lab, in `make test`: bench/simulate/lab_check.sh predicts two nodes of
// two fixed-speed workers (DenseNet-121 at 64 px, 2x2, over the lab's 1 Gbit/s fabric and
// 250 Mbit/s overlay, both systems) from the one-worker compute profile and the paths' commbench
// profiles alone, measures them with lab/compare.sh, and each prediction must be within a sanity
// bound (below). The goal's 10 % is held by the benchmark (lab_check.sh on an idle machine,
// docs/comparison.md), not here: a timed check on a shared machine measures the machine. Runs
// alone (ctest RUN_SERIAL): other tests' load would be measured instead. Also lab_check.sh's
// diagnostic --at-runs-speed on a recorded set (predictions again, no lab), and options refused
// before anything is measured.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

#include "lab/lab_fixture.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

// Nodes of quarter-core workers: predicted from the median of three one-worker profiles, four
// idle runs put 15 of 16 predictions within 6.8 % (docs/perf.md), but the runs drift with this
// 2-core VM's speed, which moves by 10-30 % within minutes: one run of the suite measured 1x2 at
// 7.27 images/s on Kubernetes and 9.23 on bare metal, the same loopback path (+27.9 %), and on
// another VM an idle run predicted 1x2 43.6 % too fast (a step of 0.80 s against a measured
// 1.14 s), the next run of the same check +7.2 and +19.4 %. So the check here is a sanity bound: a
// misread layout or a missing inter-node path breaks it (without the 250 Mbit/s overlay, 2x2 on
// Kubernetes is predicted at about twice its measured images/s).
constexpr double kMaxErrorFixedSpeed = 0.5;

// The rows of a check.tsv after its header.
std::vector<std::string> check_rows(const std::string& file) {
  std::istringstream in(file_contents(file));
  std::vector<std::string> rows;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line))
    rows.push_back(line);
  return rows;
}

// Runs lab_check.sh with ARGS (DenseNet-121 over the 1 Gbit/s fabric and 250 Mbit/s overlay),
// workers of QUOTA cores and paths profiled up to COMM_MAX_MIB, and checks each row of its
// check.tsv: the error is the one of its two numbers, within MAX_ERROR, of one of LAYOUTS; that
// the compute profile recorded the quota, and that each path's profile ends at COMM_MAX_MIB;
// returns how many rows there were.
class LabSimulate : public LabTest {
 protected:
  int check_predictions(const std::string& args, const std::vector<std::string>& layouts,
                        double max_error, double quota, int comm_max_mib) const;
};

int LabSimulate::check_predictions(const std::string& args, const std::vector<std::string>& layouts,
                                   double max_error, double quota, int comm_max_mib) const {
  TempDir dir;
  const std::string out = dir.path() + "/check";
  const ProcessResult r =
      run_shell(env() + " bash " + source_dir() +
                "/bench/simulate/lab_check.sh --archs densenet121 --caps 1gbit/250mbit " + args +
                fmt::format(" --worker-cpu {} --comm-max {}M", quota, comm_max_mib) + " --bin " +
                chexscale_bin() + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(namespaces().empty()) << "lab_check.sh left its lab up";
  const std::string base = out + "/profiles/densenet121-fabric-1gbit_overlay-250mbit";
  const auto profile = nlohmann::json::parse(file_contents(base + ".json"));
  EXPECT_DOUBLE_EQ(profile.value("cpu_quota_cores", 0.0), quota);
  // The profile predicted from is the one of the median step of the three taken.
  std::vector<double> steps;
  for (int k = 1; k <= 3; ++k) {
    const auto one = nlohmann::json::parse(file_contents(fmt::format("{}-p{}.json", base, k)));
    steps.push_back(one["phases_s"]["step"].get<double>());
  }
  EXPECT_DOUBLE_EQ(profile["phases_s"]["step"].get<double>(), median(steps));
  for (const char* path : {"fabric", "overlay", "intra-node"}) {
    const auto network = nlohmann::json::parse(file_contents(
        fmt::format("{}/profiles/{}-fabric-1gbit_overlay-250mbit-float32.json", out, path)));
    const auto& samples = network["samples"];
    EXPECT_DOUBLE_EQ(samples.empty() ? 0.0 : samples.back()["bytes"].get<double>(),
                     comm_max_mib << 20)
        << path;
  }
  int checked = 0;
  for (const std::string& line : check_rows(out + "/check.tsv")) {
    std::istringstream fields(line);
    std::string arch, cap, layout, system, variant;
    double measured = 0, predicted = 0, error = 0;
    fields >> arch >> cap >> layout >> system >> variant >> measured >> predicted >> error;
    EXPECT_FALSE(fields.fail()) << line;
    EXPECT_NE(std::find(layouts.begin(), layouts.end(), layout), layouts.end()) << line;
    EXPECT_NEAR(error, (predicted - measured) / measured, 1e-6) << line;
    fmt::print("{} {} {} {}: measured {:.2f} images/s, predicted {:.2f}, error {:+.1f} %\n", arch,
               layout, system, variant, measured, predicted, 100 * error);
    EXPECT_LE(std::abs(error), max_error) << line;
    ++checked;
  }
  return checked;
}

// Two nodes of two workers (2x2: the loopback inside each node and the capped fabric or overlay
// between them), every worker a fixed-speed device of a quarter core, predicted from the
// one-worker profile at that quota (which it records) and the three paths' profiles; each
// measurement the median of two rounds (one round alone measured the same 1x2 path at 12.96 and
// 19.63 images/s on the two systems). The paths are profiled up to 16 MiB (the largest of
// DenseNet-121's buckets, 25 MiB, lies on the line through the two largest sizes), so that the
// check fits CI's slower cores in about six minutes.
TEST_F(LabSimulate, NodesOfTwoFixedSpeedWorkersArePredictedWithinASanityBound) {
  EXPECT_EQ(check_predictions("--variants overlapped --layouts 1x1,2x2 --steps 6 --warmup 2 "
                              "--rounds 2",
                              {"2x2"}, kMaxErrorFixedSpeed, 0.25, 16),
            2);
}

// A count of profiles below one is refused before anything is measured.
TEST_F(LabSimulate, ZeroProfilesAreRefused) {
  TempDir dir;
  const ProcessResult r = run_shell(env() + " bash " + source_dir() +
                                    "/bench/simulate/lab_check.sh --profiles 0 --bin " +
                                    chexscale_bin() + " --out " + dir.path() + "/check 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--profiles '0': a count of 1 or more"), std::string::npos) << r.output;
  EXPECT_TRUE(namespaces().empty());
}

// What lab/compare.sh will refuse is refused before any profile is taken: PowerSGD needs three
// warm-up steps (compare.sh's rule), and nothing is measured or written.
TEST_F(LabSimulate, WhatCompareRefusesIsRefusedBeforeProfiling) {
  TempDir dir;
  const ProcessResult r = run_shell(env() + " bash " + source_dir() +
                                    "/bench/simulate/lab_check.sh --variants overlapped,powersgd4 "
                                    "--warmup 2 --bin " +
                                    chexscale_bin() + " --out " + dir.path() + "/check 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("variant 'powersgd4' needs --warmup 3 or more"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/check")) << r.output;
  EXPECT_TRUE(namespaces().empty());
}

// The diagnostic --at-runs-speed on a recorded set (the sixth held-out set's 1x3 runs, copied):
// each compute profile is scaled to the median step of its own model's and cap's measured
// one-worker runs before predicting; the recorded check.tsv is left as it was, and the option is
// refused where it has no runs to read. No lab is brought up, so no root is needed.
TEST(LabCheckAtRunsSpeed, ScalesEachProfileToItsOneWorkerRuns) {
  TempDir dir;
  const std::string set = dir.path() + "/set";
  const std::string script = source_dir() + "/bench/simulate/lab_check.sh";
  const ProcessResult copied = run_shell(
      "cp -r " + source_dir() + "/bench/results/2026-12-06-simulate-sixth-heldout/1x3 " + set);
  ASSERT_EQ(copied.exit_code, 0) << copied.output;
  const std::string recorded = file_contents(set + "/check.tsv");
  const std::string args =
      " --archs densenet121,resnet50 --caps 1800mbit/450mbit,900mbit/220mbit --variants "
      "overlapped,fp16 --layouts 1x1,1x3 --image-size 64 --batch 8 --steps 5 --warmup 2 "
      "--worker-cpu 0.25 --bin " +
      chexscale_bin() + " --out " + set;
  const ProcessResult refused = run_shell("bash " + script + " --at-runs-speed" + args + " 2>&1");
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("use it with --predict-only"), std::string::npos) << refused.output;

  const ProcessResult r =
      run_shell("bash " + script + " --predict-only --at-runs-speed" + args + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(file_contents(set + "/check.tsv"), recorded);
  const std::vector<std::string> rows = check_rows(set + "/check-at-runs-speed.tsv");
  const std::vector<std::string> before = check_rows(set + "/check.tsv");
  ASSERT_EQ(rows.size(), 16u);
  ASSERT_EQ(before.size(), 16u);
  for (size_t i = 0; i < rows.size(); ++i) {
    // The same configuration and measurement; only the prediction may move.
    EXPECT_EQ(rows[i].substr(0, rows[i].rfind('\t', rows[i].rfind('\t') - 1)),
              before[i].substr(0, before[i].rfind('\t', before[i].rfind('\t') - 1)));
  }
  for (const std::string arch : {"densenet121", "resnet50"}) {
    for (const std::string tag :
         {"fabric-1800mbit_overlay-450mbit", "fabric-900mbit_overlay-220mbit"}) {
      std::vector<double> one_worker;
      for (const std::string system : {"bare-metal", "kubernetes"}) {
        const auto run = nlohmann::json::parse(file_contents(
            fmt::format("{}/lab/{}-{}/sets/{}-single/bench-w1.json", set, arch, tag, system)));
        one_worker.push_back(run["step_time_s"]["median"].get<double>());
      }
      const auto profile = nlohmann::json::parse(
          file_contents(fmt::format("{}/profiles/{}-{}.json", set, arch, tag)));
      const auto scaled = nlohmann::json::parse(
          file_contents(fmt::format("{}/sim-at-runs-speed/profile-{}-{}.json", set, arch, tag)));
      const double k = median(one_worker) / profile["phases_s"]["step"].get<double>();
      EXPECT_NEAR(scaled["phases_s"]["step"].get<double>(), median(one_worker), 1e-9) << arch;
      EXPECT_NEAR(scaled["phases_s"]["backward"].get<double>(),
                  k * profile["phases_s"]["backward"].get<double>(), 1e-9);
      EXPECT_NEAR(scaled["parameters"][0]["ready_s"].get<double>(),
                  k * profile["parameters"][0]["ready_s"].get<double>(), 1e-9);
      EXPECT_NEAR(scaled["gradient_passes_s"]["casts"].get<double>(),
                  k * profile["gradient_passes_s"]["casts"].get<double>(), 1e-9);
    }
  }
}

}  // namespace
}  // namespace chexscale::test_util
