// The mpi collective backend end to end (builds with MPI only): real `mpirun -np 2` jobs of the
// test worker (the reducer's steps; a stalled rank named by the watchdog) and of `chexscale train`,
// whose weights and losses equal the same run over Gloo bit for bit, with two ranks and (the
// allreduce by chexscale's ring) with three; and `--backend mpi` refused with the way out under
// chexscale's own launcher.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "distributed/rendezvous.h"
#include "e2e/metrics_records.h"
#include "test_util/chexscale_cli.h"
#include "test_util/helper_programs.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;

// mpirun of `ranks` on one host, kept on loopback, with `env` ("NAME=VALUE") passed to every rank.
std::string mpirun(const std::vector<std::string>& env = {}, int ranks = 2) {
  std::string line = "mpirun -np " + std::to_string(ranks) +
                     " --oversubscribe --allow-run-as-root --mca btl_tcp_if_include lo "
                     "--mca oob_tcp_if_include lo -x MASTER_PORT=" +
                     std::to_string(distributed::pick_free_port());
  for (const std::string& e : env)
    line += " -x " + e;
  return line + " ";
}

// Runs an mpirun line to its end, or kills it after `limit`: a job that hangs fails with what it
// printed (ctest's own timeout would kill the whole test program and show nothing of it).
test_util::ProcessResult run_mpirun(const std::string& line, std::chrono::seconds limit) {
  auto run = test_util::run_shell(line, test_util::environment_with(), limit);
  EXPECT_FALSE(run.timed_out) << "mpirun still ran after " << limit.count() << " s:\n"
                              << run.output;
  return run;
}

TEST(MpiBackend, ReducerStepsRunToCompletionUnderMpirun) {
  test_util::TempDir dir;
  const auto run = run_mpirun(mpirun({"CHEXSCALE_TEST_BACKEND=mpi"}) +
                                  test_util::distributed_worker() + " loop " + dir.path() + " 3",
                              std::chrono::seconds(120));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("rank 0 finished 3 steps"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rank 1 finished 3 steps"), std::string::npos) << run.output;
}

TEST(MpiBackend, TheWatchdogNamesAStalledRank) {
  test_util::TempDir dir;
  const auto run =
      run_mpirun(mpirun({"CHEXSCALE_TEST_BACKEND=mpi", "CHEXSCALE_TEST_COLLECTIVE_TIMEOUT=3"}) +
                     test_util::distributed_worker() + " stall " + dir.path(),
                 std::chrono::seconds(90));
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("barrier (collective #1) did not complete within 3 s on rank 0"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("ranks that did not arrive: 1"), std::string::npos) << run.output;
}

// `chexscale train` of resnet18 on 32-pixel synthetic images under mpirun of `ranks` with
// `backend` (which may carry more flags).
test_util::ProcessResult train(const std::string& data, const std::string& out,
                               const std::string& backend, int ranks = 2) {
  return run_mpirun(
      mpirun({}, ranks) + test_util::chexscale_bin() + " train --data " + data + " --out " + out +
          " --backend " + backend +
          " --arch resnet18 --image-size 32 --crop-size 32 --batch-size 4 --epochs 1 --max-steps 4 "
          "--checkpoint-every 4 --no-augment --loader-threads 1 --val-threads 1 --intra-op-threads "
          "1 "
          "--log-every 1 --seed 5",
      std::chrono::seconds(120));
}

// Trains with `ranks` over gloo and over `mpi` (the mpi backend and its flags), and expects equal
// losses at every step and byte-equal final weights. Gloo's own ring, over loopback: a job of one
// node otherwise sums through shared memory, in rank order.
void expect_mpi_training_equals_gloo(const std::string& mpi_backend, int ranks) {
  test_util::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_EQ(
      test_util::run_chexscale("synth --out " + data + " --images 64 --size 32 --seed 4").exit_code,
      0);
  const auto gloo = train(data, dir.path() + "/gloo", "gloo --no-shared-memory", ranks);
  ASSERT_EQ(gloo.exit_code, 0) << gloo.output;
  const auto mpi = train(data, dir.path() + "/mpi", mpi_backend, ranks);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.output;
  const auto steps_gloo = test_util::metrics_records(dir.path() + "/gloo/metrics.jsonl", "step");
  const auto steps_mpi = test_util::metrics_records(dir.path() + "/mpi/metrics.jsonl", "step");
  ASSERT_EQ(steps_gloo.size(), 4u);
  ASSERT_EQ(steps_mpi.size(), steps_gloo.size());
  for (size_t i = 0; i < steps_gloo.size(); ++i) {
    EXPECT_EQ(steps_gloo[i].at("loss").get<double>(), steps_mpi[i].at("loss").get<double>()) << i;
  }
  const std::string weights = "/checkpoints/step-000000004.safetensors";
  const std::string a = test_util::file_contents(dir.path() + "/gloo" + weights);
  const std::string b = test_util::file_contents(dir.path() + "/mpi" + weights);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the final weights differ between --backend gloo and --backend "
                      << mpi_backend;
}

TEST(MpiBackend, TrainingEqualsGlooToTheLastBitWithTwoRanks) {
  // fp32 sums of two ranks are a + b whatever the algorithm: the runs must be identical.
  expect_mpi_training_equals_gloo("mpi", 2);
}

TEST(MpiBackend, TrainingByTheRingEqualsGlooToTheLastBitWithThreeRanks) {
  // Three ranks: a + (b + c) and (a + b) + c differ; the ring adds in Gloo's order.
  expect_mpi_training_equals_gloo("mpi --mpi-allreduce ring", 3);
}

TEST(MpiBackend, OwnLauncherIsAUsageErrorThatSaysToUseMpirun) {
  const auto run = test_util::run_chexscale(
      "launch --nproc-per-node 2 -- commbench --backend mpi -b 1K -e 1K -n 1 -w 0");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("backend mpi needs the ranks started by an MPI launcher (mpirun -np N"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("under the torchrun convention"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace chexscale
