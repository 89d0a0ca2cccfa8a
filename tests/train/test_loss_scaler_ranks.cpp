// Dynamic loss scaling with two real ranks over Gloo: when only one rank's scaled gradients
// overflow, both ranks skip the same steps (the decision is taken on the averaged gradients),
// back off to the same scale, and end with identical weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "test_util/helper_programs.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

using nlohmann::json;

TEST(LossScalerRanks, OneRanksOverflowSkipsTheStepOnEveryRank) {
  test_util::TempDir dir;
  test_util::WorkerGroup group(test_util::scaler_worker(), {dir.path(), "12"}, 2, dir.path(),
                               {{"OMP_NUM_THREADS", "1"}});
  const auto exits = group.wait_all(std::chrono::seconds(120));
  for (const auto& e : exits)
    ASSERT_EQ(e.exit_code, 0) << e.output;

  const json r0 = json::parse(read_file(dir.path() + "/rank0.json"));
  const json r1 = json::parse(read_file(dir.path() + "/rank1.json"));
  // The setup: only rank 0 overflows on its own at the initial scale.
  ASSERT_TRUE(r0.at("local_overflow_at_init").get<bool>());
  ASSERT_FALSE(r1.at("local_overflow_at_init").get<bool>());

  const json& s0 = r0.at("steps");
  const json& s1 = r1.at("steps");
  ASSERT_EQ(s0.size(), 12u);
  ASSERT_EQ(s1.size(), 12u);
  int skipped = 0;
  for (size_t i = 0; i < s0.size(); ++i) {
    EXPECT_EQ(s0[i].at("skipped"), s1[i].at("skipped")) << "step " << i;
    EXPECT_EQ(s0[i].at("scale_before"), s1[i].at("scale_before")) << "step " << i;
    EXPECT_TRUE(s1[i].at("loss_finite").get<bool>());
    skipped += s1[i].at("skipped").get<bool>() ? 1 : 0;
  }
  // Rank 1 skipped its first step although its own gradients were fine; the scale backed off
  // until rank 0's fit, and later steps were applied on both.
  EXPECT_TRUE(s1[0].at("skipped").get<bool>());
  EXPECT_GE(skipped, 1);
  EXPECT_LT(skipped, 12);
  EXPECT_LT(r1.at("final_scale").get<double>(), s1[0].at("scale_before").get<double>());
  EXPECT_EQ(r0.at("final_scale"), r1.at("final_scale"));

  const auto p0 = test_util::saved_tensors(dir.path() + "/rank0.pt");
  const auto p1 = test_util::saved_tensors(dir.path() + "/rank1.pt");
  ASSERT_EQ(p0.size(), p1.size());
  for (size_t i = 0; i < p0.size(); ++i)
    EXPECT_TRUE(torch::equal(p0[i], p1[i])) << "parameter " << i;
}

}  // namespace
}  // namespace chexscale
