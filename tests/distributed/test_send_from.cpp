// DistContext::send_from_ with real ranks over Gloo: the root's tensor reaches the receivers
// only, the others keep theirs, and the collectives after it stay in step (flat and
// hierarchical groups).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_util/helper_programs.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

void check_send_from(const std::map<std::string, std::string>& env, int ranks_per_node) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"send-from", dir.path()}, 4,
                             dir.path(), env, ranks_per_node);
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  const torch::Tensor sent = torch::arange(1000003, torch::kFloat);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const auto held = test_util::saved_tensors(fmt::format("{}/sent.rank{}.pt", dir.path(), r));
    ASSERT_EQ(held.size(), 2u);
    const bool receives = r == 0 || r == 3;
    EXPECT_TRUE(torch::equal(
        held[0], r == 1 || receives ? sent : torch::full({1000003}, static_cast<float>(-r - 1))));
    // 0 + 1 + 2 + 3: the allreduce after it met every rank.
    EXPECT_TRUE(torch::equal(held[1], torch::full({3}, 6.0f))) << held[1];
  }
}

TEST(SendFrom, TheRootsTensorReachesTheReceiversOnlyAndTheRanksStayInStep) {
  check_send_from({}, 1);
}

TEST(SendFrom, ThroughTheHierarchicalGroupToo) {
  check_send_from({{"CHEXSCALE_TEST_HIERARCHICAL", "1"}}, 2);
}

}  // namespace
}  // namespace chexscale
