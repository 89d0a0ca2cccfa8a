// `chexscale tune` on a slow link, where one candidate is clearly better: two emulated nodes
// whose fabric links are capped at 80 Mbit/s (tbf), one rank each, ResNet-18 (about 45 MB of
// fp32 gradients a step). Uncompressed, each step's allreduce must move at least those 45 MB
// across the cap; fp16 moves half, and the compute (32-pixel images, batch 2) is a fraction of
// either, so fp16 must run at least 1.5 times as many images/s and tune must choose it. The
// uncompressed rate is also checked against what the cap allows, so that the test shows the link,
// not the CPU, decided.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "lab/lab_fixture.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "test_util/tuned_yaml.h"

namespace chexscale::test_util {
namespace {

constexpr int kPort = 29613;
constexpr int kCapMbit = 80;
// ResNet-18's parameters, at least (11.2 M with chexscale's head): an allreduce of two ranks
// sends every byte of the gradients once from each rank (reduce-scatter then all-gather halves).
constexpr double kGradientBytes = 11.0e6 * 4;
constexpr int kWorldBatch = 2 * 2;  // two ranks of batch 2

const char* const kNone = "bucket 25 MiB, none, overlap";
const char* const kFp16 = "bucket 25 MiB, fp16, overlap";

class LabTune : public LabTest {
 protected:
  void SetUp() override {
    LabTest::SetUp();
    if (HasFatalFailure()) return;
    const ProcessResult up = cluster(fmt::format("up --nodes 2 --fabric-rate {}mbit", kCapMbit));
    ASSERT_EQ(up.exit_code, 0) << up.output;
  }

  // Node `node`'s launcher of the 2-node tune job, in its namespace, over its capped eth0 (rank 0
  // writes `out`).
  ProcessSpec tune_node(int node, const std::string& out) const {
    const std::string tune = fmt::format(
        "launch --nnodes 2 --node-rank {} --master-addr 10.77.0.1 --master-port {} "
        "--nproc-per-node 1 -- tune --arch resnet18 --image-size 32 --batch-size 2 --threads 1 "
        "--bucket-mb-candidates 25 --allow-compression fp16 --overlap-only "
        "--first-round-steps 2 --warmup-steps 1 --out {}",
        node, kPort, out);
    return {{"/bin/sh", "-c",
             fmt::format("exec ip netns exec {}-n{} env -i PATH=\"$PATH\" HOME=/tmp "
                         "OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0 '{}' {}",
                         prefix_, node, chexscale_bin(), tune)},
            environment_with(),
            tmp_.path() + "/node" + std::to_string(node) + ".log"};
  }

  TempDir tmp_;
};

TEST_F(LabTune, Fp16WinsByHalfAgainOverACappedLinkAndTuneChoosesIt) {
  const std::string out = tmp_.path() + "/tuned.yaml";
  const auto results =
      run_processes({tune_node(0, out), tune_node(1, out)}, std::chrono::seconds(240));
  for (size_t node = 0; node < results.size(); ++node) {
    ASSERT_FALSE(results[node].timed_out) << "node " << node << ":\n" << results[node].output;
    ASSERT_EQ(results[node].exit_code, 0) << "node " << node << ":\n" << results[node].output;
  }
  const std::string yaml = file_contents(out);
  // Two candidates, eta 3: one round of both, ceil(2 / 3) = 1 left.
  const std::vector<TrialLine> trials = trial_lines(yaml);
  ASSERT_EQ(trials.size(), 2u) << yaml;
  std::map<std::string, double> rate;
  for (const TrialLine& t : trials) {
    EXPECT_EQ(t.steps, 2) << yaml;
    rate[t.candidate] = t.images_per_sec;
  }
  ASSERT_EQ(rate.count(kNone), 1u) << yaml;
  ASSERT_EQ(rate.count(kFp16), 1u) << yaml;
  // The link decided: uncompressed, no faster than the cap lets the gradients through.
  const double capped = kWorldBatch / (kGradientBytes * 8 / (kCapMbit * 1e6));
  EXPECT_LE(rate[kNone], 1.1 * capped) << yaml;
  EXPECT_GE(rate[kFp16], 1.5 * rate[kNone]) << yaml;
  EXPECT_EQ(chosen_line(yaml), kFp16) << yaml;
  std::printf(
      "capped at %d Mbit/s: none %.3f images/s, fp16 %.3f (x%.2f); the cap allows "
      "uncompressed %.3f\n",
      kCapMbit, rate[kNone], rate[kFp16], rate[kFp16] / rate[kNone], capped);
}

}  // namespace
}  // namespace chexscale::test_util
