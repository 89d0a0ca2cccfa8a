// The mpi backend's collectives, run by every rank of a real `mpirun -np 2` job (ctest starts it
// twice: allreduce by MPI_Allreduce, as --mpi-allreduce auto picks on one host, and by chexscale's
// ring, CHEXSCALE_TEST_MPI_ALLREDUCE=ring): sums of known fp32, fp16 and bf16 values, broadcast,
// allgather, barrier, several outstanding works completing in order, MPI's own errors and a
// timed-out wait surfacing on the Work, and MPI's rank and size checked against the environment
// contract. Every rank runs every test in the same order, as the backend requires; a failure is
// reported by the rank that saw it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/error.h"
#include "distributed/dist_options.h"
#include "distributed/env.h"
#include "distributed/process_group.h"
#include "test_util/error_message.h"

namespace chexscale::distributed {
namespace {

namespace fs = std::filesystem;

class MpiCollectives : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = detect_environment(process_environment(), DistOptions{});
    const char* allreduce = std::getenv("CHEXSCALE_TEST_MPI_ALLREDUCE");
    group_ = make_mpi_group(env_, parse_mpi_allreduce(allreduce ? allreduce : "auto"));
    // A folder both ranks know (rank 0's pid) for the markers that order the ranks' steps.
    std::vector<at::Tensor> pid{torch::full({1}, static_cast<int64_t>(::getpid()), torch::kLong)};
    group_->broadcast(pid)->wait();
    dir_ = fs::temp_directory_path() /
           ("chexscale-mpi-test-" + std::to_string(pid[0].item<int64_t>()));
    if (env_.rank.value == 0) fs::create_directories(dir_);
    group_->barrier()->wait();
  }
  static void TearDownTestSuite() {
    group_->barrier()->wait();
    if (env_.rank.value == 0) fs::remove_all(dir_);
    group_.reset();
  }

  int rank() const { return env_.rank.value; }
  int world() const { return env_.world_size.value; }
  // Rank 0 marks a step as done; rank 1 waits for it (files: no collective can order these).
  static void mark(const std::string& name) { std::ofstream(dir_ / name) << "1"; }
  static void await(const std::string& name) {
    while (!fs::exists(dir_ / name))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  static RendezvousEnv env_;
  static c10::intrusive_ptr<compat::CollectiveGroup> group_;
  static fs::path dir_;
};

RendezvousEnv MpiCollectives::env_;
c10::intrusive_ptr<compat::CollectiveGroup> MpiCollectives::group_;
fs::path MpiCollectives::dir_;

// What rank r contributes: the same numbers on every rank, different between ranks.
at::Tensor contribution(int r, c10::ScalarType type) {
  torch::manual_seed(100 + r);
  return (torch::randn({1000}) * 8).to(type);
}

TEST_F(MpiCollectives, RankAndSizeComeFromMpiAndMatchTheEnvironment) {
  EXPECT_EQ(group_->getRank(), rank());
  EXPECT_EQ(group_->getSize(), world());
  EXPECT_EQ(world(), 2);
  EXPECT_EQ(env_.convention, "OpenMPI");
  EXPECT_EQ(group_->getBackendName(), "mpi");
}

TEST_F(MpiCollectives, AllreduceSumsFp32Exactly) {
  std::vector<at::Tensor> io{torch::arange(4096, torch::kFloat) * (rank() + 1)};
  group_->allreduce(io)->wait();
  EXPECT_TRUE(torch::equal(io[0], torch::arange(4096, torch::kFloat) * 3));
}

TEST_F(MpiCollectives, AllreduceSumsFp16AndBf16RoundingOnceAsGlooDoes) {
  for (c10::ScalarType type : {torch::kHalf, torch::kBFloat16}) {
    std::vector<at::Tensor> io{contribution(rank(), type)};
    group_->allreduce(io)->wait();
    // Two ranks: each element is widened to float, summed and rounded to nearest once.
    const at::Tensor expected =
        (contribution(0, type).to(torch::kFloat) + contribution(1, type).to(torch::kFloat))
            .to(type);
    EXPECT_TRUE(torch::equal(io[0], expected)) << type;
    EXPECT_FALSE(torch::equal(io[0], contribution(rank(), type))) << type;
  }
}

TEST_F(MpiCollectives, AllreduceMaxMinAndProduct) {
  const at::Tensor mine = contribution(rank(), torch::kFloat);
  const at::Tensor other = contribution(1 - rank(), torch::kFloat);
  for (auto [op, expected] : {std::pair{c10d::ReduceOp::MAX, torch::maximum(mine, other)},
                              {c10d::ReduceOp::MIN, torch::minimum(mine, other)},
                              {c10d::ReduceOp::PRODUCT, mine * other}}) {
    std::vector<at::Tensor> io{mine.clone()};
    c10d::AllreduceOptions opts;
    opts.reduceOp = op;
    group_->allreduce(io, opts)->wait();
    EXPECT_TRUE(torch::equal(io[0], expected)) << static_cast<int>(op);
  }
  std::vector<at::Tensor> ints{torch::full({5}, rank() + 2, torch::kLong)};
  group_->allreduce(ints)->wait();
  EXPECT_TRUE(torch::equal(ints[0], torch::full({5}, 5, torch::kLong)));
}

TEST_F(MpiCollectives, BroadcastCopiesTheRootsTensor) {
  for (int root : {0, 1}) {
    std::vector<at::Tensor> io{rank() == root ? torch::arange(777, torch::kDouble) + root
                                              : torch::zeros({777}, torch::kDouble)};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    group_->broadcast(io, opts)->wait();
    EXPECT_TRUE(torch::equal(io[0], torch::arange(777, torch::kDouble) + root)) << root;
  }
}

TEST_F(MpiCollectives, AllgatherCollectsEveryRanksTensorInRankOrder) {
  std::vector<at::Tensor> input{torch::full({3, 2}, 10.0 + rank(), torch::kHalf)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < world(); ++r)
    output[0].push_back(torch::zeros({3, 2}, torch::kHalf));
  group_->allgather(output, input)->wait();
  for (int r = 0; r < world(); ++r) {
    EXPECT_TRUE(torch::equal(output[0][r], torch::full({3, 2}, 10.0 + r, torch::kHalf))) << r;
  }
}

TEST_F(MpiCollectives, BarrierWaitsForEveryRank) {
  // Rank 1 marks before it enters; rank 0 leaves the barrier only after rank 1 entered it.
  if (rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    mark("before-barrier");
  }
  group_->barrier()->wait();
  EXPECT_TRUE(fs::exists(dir_ / "before-barrier"));
}

TEST_F(MpiCollectives, OutstandingWorksCompleteInOrderWithTheirFutures) {
  constexpr int kWorks = 8;
  // Rank 1 submits only after rank 0 saw all of its own works pending: submitting never waits.
  if (rank() == 1) await("submitted");
  std::vector<std::vector<at::Tensor>> io(kWorks);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::atomic<int> callbacks{0};
  for (int i = 0; i < kWorks; ++i) {
    io[i] = {torch::full({1 << 16}, static_cast<float>(i + rank()))};
    works.push_back(group_->allreduce(io[i]));
    works.back()->getFuture()->addCallback([&callbacks](c10::ivalue::Future&) { ++callbacks; });
  }
  if (rank() == 0) {
    for (const auto& w : works)
      EXPECT_FALSE(w->isCompleted());
    mark("submitted");
  }
  for (int i = kWorks - 1; i >= 0; --i) {
    works[i]->wait();
    EXPECT_TRUE(torch::equal(io[i][0], torch::full({1 << 16}, 2.0F * i + 1))) << i;
  }
  EXPECT_EQ(callbacks.load(), kWorks);
}

TEST_F(MpiCollectives, MpiErrorsBecomeExceptionsOnTheWork) {
  std::vector<at::Tensor> io{torch::ones({4})};
  c10d::BroadcastOptions opts;
  opts.rootRank = world();  // MPI checks the root: MPI_ERR_ROOT on every rank, nothing moves
  auto work = group_->broadcast(io, opts);
  const std::string msg = test_util::message_of<c10::Error>([&] { work->wait(); });
  EXPECT_NE(msg.find("MPI_Bcast failed: MPI_ERR_ROOT"), std::string::npos) << msg;
  EXPECT_FALSE(work->isSuccess());
  // The group goes on working.
  std::vector<at::Tensor> sum{torch::ones({4})};
  group_->allreduce(sum)->wait();
  EXPECT_TRUE(torch::equal(sum[0], torch::full({4}, 2.0F)));
}

TEST_F(MpiCollectives, BadInputIsRefusedWhenSubmitted) {
  std::vector<at::Tensor> strided{torch::ones({4, 4}).t()};
  std::string msg = test_util::message_of<c10::Error>([&] { group_->allreduce(strided); });
  EXPECT_NE(msg.find("dense contiguous"), std::string::npos) << msg;
  std::vector<at::Tensor> io{torch::ones({4})};
  c10d::AllreduceOptions avg;
  avg.reduceOp = c10d::ReduceOp::AVG;
  msg = test_util::message_of<c10::Error>([&] { group_->allreduce(io, avg); });
  EXPECT_NE(msg.find("AVG: sum, then divide"), std::string::npos) << msg;
  std::vector<at::Tensor> complex{torch::ones({4}, torch::kComplexFloat)};
  msg = test_util::message_of<c10::Error>([&] { group_->allreduce(complex); });
  EXPECT_NE(msg.find("cannot carry"), std::string::npos) << msg;
}

TEST_F(MpiCollectives, AWaitThatTimesOutLeavesTheWorkToComplete) {
  if (rank() == 1) await("timed-out");
  std::vector<at::Tensor> io{torch::full({16}, 1.0F + rank())};
  auto work = group_->allreduce(io);
  if (rank() == 0) {
    const std::string msg =
        test_util::message_of<c10::Error>([&] { work->wait(std::chrono::milliseconds(200)); });
    EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
    mark("timed-out");
  }
  work->wait();
  EXPECT_TRUE(torch::equal(io[0], torch::full({16}, 3.0F)));
}

TEST_F(MpiCollectives, ARankThatDisagreesWithMpiIsAUsageError) {
  RendezvousEnv wrong = env_;
  wrong.rank.value = 1 - rank();
  const std::string msg = test_util::message_of<UsageError>([&] { make_mpi_group(wrong); });
  EXPECT_NE(msg.find(fmt::format("MPI says this process is rank {} of 2", rank())),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace chexscale::distributed
