// The simulator against measurement on this machine: two configurations (ResNet-18 and
// DenseNet-121 at 64 px, batch 8, one thread per worker) are predicted for two workers over
// loopback from a one-worker `bench --profile` and a loopback `commbench --profile` alone, then
// run for real; the predicted images/s must be within kMaxError of the measured. Runs serially
// (ctest RUN_SERIAL): other tests' load would be measured instead.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "common/atomic_file.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

// The goal over the lab is 10 % at worst. Here the prediction is systematically high: over four
// runs ResNet-18 by 9-23 % and DenseNet-121 by 2-9 % (docs/perf.md); profiling the one worker
// beside a second one (shared caches and memory bandwidth) did not move it. This bound catches a
// broken model or profile, not the goal.
constexpr double kMaxError = 0.30;

void run_ok(const std::string& args) {
  const auto r = test_util::run_chexscale(args);
  ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
}

double predicted_error(const std::string& arch, const std::string& dir,
                       const std::string& network) {
  const std::string workload = " --arch " + arch +
                               " --image-size 64 --batch-size 8 --threads 1 --steps 12 "
                               "--warmup-steps 2";
  run_ok("bench" + workload + " --profile " + dir + "/compute.json --out " + dir + "/one");
  run_ok("launch --nproc-per-node 2 -- bench" + workload + " --out " + dir + "/two");
  run_ok("simulate --compute " + dir + "/compute.json --network intra-node=" + network +
         " --nodes 1 --workers-per-node 2 --no-charts --out " + dir + "/sim");
  const double measured =
      json::parse(read_file(dir + "/two/bench.json"))["images_per_sec"].get<double>();
  const double predicted =
      json::parse(read_file(dir + "/sim/simulate.json"))["systems"][0]["jobs"][0]["images_per_sec"]
          .get<double>();
  const double error = (predicted - measured) / measured;
  std::printf("%s: measured %.1f images/s, predicted %.1f, error %+.1f %%\n", arch.c_str(),
              measured, predicted, 100 * error);
  return error;
}

TEST(PredictionAccuracy, TwoWorkersOverLoopbackWithinBound) {
  test_util::TempDir dir;
  const std::string network = dir.path() + "/loopback.json";
  run_ok("launch --nproc-per-node 2 -- commbench -b 64K -e 64M -f 4 -n 5 -w 2 --profile " +
         network + " --profile-path intra-node");
  for (const std::string arch : {"resnet18", "densenet121"}) {
    const std::string sub = dir.path() + "/" + arch;
    const double error = predicted_error(arch, sub, network);
    EXPECT_LE(std::abs(error), kMaxError) << arch;
  }
}

}  // namespace
}  // namespace chexscale
