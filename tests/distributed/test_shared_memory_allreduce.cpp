// Node shared memory's allreduce (distributed/shared_memory_allreduce.h) with real ranks on this
// host (the test worker's `shm` scenarios): exact sums of sizes that do not split evenly into the
// ranks' cache-line shares, float32 and float64, two in flight; allreduces that the ranks describe
// differently fail on every rank with the reason; a rank that is gone is named within seconds, not
// after the collective timeout; and no segment is left in /dev/shm.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_util/helper_programs.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

// The segments rank 0 (process `pid`) named in /dev/shm.
int segments_left_by(pid_t pid) {
  int left = 0;
  const std::string prefix = fmt::format("chexscale-{}-", pid);
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    left += entry.path().filename().string().rfind(prefix, 0) == 0 ? 1 : 0;
  return left;
}

void check_sums(int world) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"shm", dir.path(), "sums"}, world,
                             dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < world; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  EXPECT_EQ(segments_left_by(job.pid(0)), 0);
  const std::vector<std::pair<int64_t, torch::Dtype>> buffers{{1, torch::kFloat},
                                                              {15, torch::kFloat},
                                                              {17, torch::kFloat},
                                                              {1000003, torch::kFloat},
                                                              {33, torch::kDouble}};
  for (int r = 0; r < world; ++r) {
    const auto got = test_util::saved_tensors(fmt::format("{}/shm-sums.rank{}.pt", dir.path(), r));
    ASSERT_EQ(got.size(), 2 * buffers.size());
    for (size_t b = 0; b < buffers.size(); ++b) {
      const auto [n, type] = buffers[b];
      // sum over ranks of (rank + i % 7) = world * (i % 7) + world * (world - 1) / 2
      const torch::Tensor sum =
          torch::arange(n, torch::kLong).remainder(7) * world + world * (world - 1) / 2;
      const torch::Tensor want_sum = sum.to(type);
      const torch::Tensor want_mean = (sum.to(torch::kDouble) / world).to(type);
      EXPECT_EQ(got[2 * b].scalar_type(), type);
      EXPECT_TRUE(torch::equal(got[2 * b], want_sum)) << "rank " << r << ", " << n << " elements";
      EXPECT_TRUE(torch::equal(got[2 * b + 1], want_mean))
          << "rank " << r << ", " << n << " elements, divided by " << world;
    }
  }
}

TEST(SharedMemoryAllreduce, TwoRanksSumAndAverageEverySizeExactly) {
  check_sums(2);
}

TEST(SharedMemoryAllreduce, ThreeRanksSumAndAverageEverySizeExactly) {
  check_sums(3);
}

TEST(SharedMemoryAllreduce, RanksIssuingDifferentAllreducesFailOnEveryRankWithTheReason) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"shm", dir.path(), "mismatch"}, 2,
                             dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
    const std::string error =
        test_util::file_contents(fmt::format("{}/error.rank{}", dir.path(), r));
    EXPECT_NE(error.find("the ranks issued different allreduces"), std::string::npos) << error;
    EXPECT_NE(error.find("50 Float elements"), std::string::npos) << error;
    EXPECT_NE(error.find("100 Float elements"), std::string::npos) << error;
  }
}

TEST(SharedMemoryAllreduce, ARankThatIsGoneIsNamedWithinSecondsNotAtTheTimeout) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"shm", dir.path(), "gone"}, 2,
                             dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  ASSERT_EQ(exits[0].exit_code, 0) << exits[0].output;
  const std::string error = test_util::file_contents(dir.path() + "/error.rank0");
  EXPECT_NE(error.find(fmt::format("rank 1 (pid {}) is gone", job.pid(1))), std::string::npos)
      << error;
  const size_t at = error.find("seconds ");
  ASSERT_NE(at, std::string::npos) << error;
  EXPECT_LT(std::stod(error.substr(at + 8)), 20.0) << "the timeout is 60 s: " << error;
}

}  // namespace
}  // namespace chexscale
